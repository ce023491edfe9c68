// The E2B-compatible surface through the real `e2b` SDK: `Sandbox.create(template)` → first
// `commands.run('true')`, for (a) an image (debian:bookworm-slim, the stand-in the templates use:
// the SDK runs every command with /bin/bash) beside `docker run --rm <image> true` in the same run,
// interleaved; and (b) a warm-pool claim of the rl-environment-ops template stack (`ver_…` as the
// template, a pool of 2 on that version, each claim taken once the pool is full again). Real
// control plane with its E2B listener, real svcd, real Docker.
//
//   node bench/e2b/run.ts [--runs 10] [--warm-runs 20] [--only image|warm]
//
// Each run is split where the time went: the SDK's create (POST /sandboxes) and its first command
// (Connect `process.Start` stream until the end event), and from the control plane's rows, the
// image sandbox's deployment phases and the `proc.start` command's round trip to svcd.
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Sandbox } from 'e2b';
import { finished, startReal } from '../../test/e2e/real.ts';
import { ensureTemplateImages } from '../../test/support/images.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '10' },
    'warm-runs': { type: 'string', default: '20' },
    only: { type: 'string', default: 'image,warm' },
  },
});
const ONLY = new Set(values.only.split(','));
const IMAGE = 'debian:bookworm-slim';
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const load = () => loadavg()[0];
const ms = (a?: string | null, b?: string | null) => (a && b ? Date.parse(b) - Date.parse(a) : Number.NaN);
const sh = (cmd: string, args: string[]) =>
  new Promise<void>((resolve, reject) =>
    execFile(cmd, args, (err, _o, e) => (err ? reject(new Error(e || err.message)) : resolve())),
  );
const timed = async (fn: () => Promise<unknown>) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

await ensureTemplateImages();
const r = await startReal({ env: { SVC_E2B_ADDR: '127.0.0.1:0' } });
const url = r.t.server.e2b?.url ?? '';
if (!url) throw new Error('the E2B listener is off');
const opts = { apiUrl: url, sandboxUrl: url, apiKey: r.t.key, requestTimeoutMs: 300_000 };
const db = r.t.server.ctx.db;
const series: Record<string, number[]> = {};
const push = (k: string, v: number) => {
  if (!Number.isFinite(v)) return;
  series[k] ??= [];
  series[k].push(v);
};
const loads: Record<string, number[]> = { image: [], warm: [] };

/** Control-plane rows of a sandbox's environment: its deployment's phases and its first proc.start. */
async function rows(sandboxId: string, prefix: string): Promise<void> {
  const env = await db.get<{ id: string }>('SELECT id FROM environments WHERE name = ?', [sandboxId]);
  if (!env) return;
  const start = await db.get<{ created_at: string; finished_at: string }>(
    "SELECT created_at, finished_at FROM commands WHERE env_id = ? AND kind = 'proc.start' ORDER BY created_at LIMIT 1",
    [env.id],
  );
  push(
    `${prefix}: proc.start command row, created → finished (svcd's exec create + start)`,
    ms(start?.created_at, start?.finished_at),
  );
  if (prefix === 'warm') {
    const thaw = await db.get<{ created_at: string; finished_at: string }>(
      "SELECT created_at, finished_at FROM commands WHERE env_id = ? AND kind = 'env.unpause' ORDER BY created_at DESC LIMIT 1",
      [env.id],
    );
    if (thaw)
      push(
        'warm: env.unpause command row, created → finished (the thaw on svcd)',
        ms(thaw.created_at, thaw.finished_at),
      );
    else push('warm: claims that found no ready member (forked cold instead)', 1);
  }
  if (prefix !== 'image') return;
  const dep = await db.get<{ id: string; created_at: string; finished_at: string }>(
    'SELECT id, created_at, finished_at FROM deployments WHERE env_id = ? ORDER BY created_at LIMIT 1',
    [env.id],
  );
  if (!dep) return;
  push('image: deployment created → finished', ms(dep.created_at, dep.finished_at));
  const phases = await db.all<{
    name: string;
    started_at: string | null;
    finished_at: string | null;
    evidence: string | null;
  }>('SELECT name, started_at, finished_at, evidence FROM phases WHERE deployment_id = ? ORDER BY seq', [
    dep.id,
  ]);
  for (const ph of phases) {
    push(`image: · phase ${ph.name}`, ms(ph.started_at, ph.finished_at));
    const ev = ph.evidence ? (JSON.parse(ph.evidence) as { timings?: Record<string, number> }) : {};
    for (const [k, v] of Object.entries(ev.timings ?? {})) push(`image: · · ${ph.name} on host: ${k}`, v);
  }
}

async function sandboxRun(template: string, prefix: string): Promise<void> {
  const t0 = performance.now();
  const s = await Sandbox.create(template, opts);
  const t1 = performance.now();
  const res = await s.commands.run('true');
  const t2 = performance.now();
  if (res.exitCode !== 0) throw new Error(`true exited ${res.exitCode}`);
  push(`${prefix}: Sandbox.create → first commands.run('true') done`, t2 - t0);
  push(`${prefix}: · Sandbox.create`, t1 - t0);
  push(`${prefix}: · commands.run('true')`, t2 - t1);
  await rows(s.sandboxId, prefix);
  await s.kill();
}

/** The same claim through svc's API: POST /v1/sandboxes {from_version}, then the command as the SDK sends it, as a process followed to its end. */
async function svcClaim(ver: string, prefix: string): Promise<void> {
  const req = r.t.req;
  const t0 = performance.now();
  const c = await req('POST', '/v1/sandboxes', { body: { from_version: ver } });
  const t1 = performance.now();
  if (c.status !== 201) throw new Error(`claim: ${c.status} ${JSON.stringify(c.body).slice(0, 300)}`);
  const env = c.body.environment.ID as string;
  const p = await req('POST', `/v1/envs/${env}/processes`, {
    body: { service: 'main', cmd: ['/bin/bash', '-l', '-c', 'true'] },
  });
  if (p.status !== 202) throw new Error(`start: ${p.status} ${JSON.stringify(p.body)}`);
  const s = await fetch(`${r.t.url}/v1/envs/${env}/processes/${p.body.pid}/stream`, {
    headers: { authorization: `Bearer ${r.t.key}`, accept: 'text/event-stream' },
  });
  let text = '';
  for await (const chunk of s.body as unknown as AsyncIterable<Uint8Array>) {
    text += Buffer.from(chunk).toString('utf8');
    if (text.includes('"type":"end"')) break;
  }
  const t2 = performance.now();
  push(
    `${prefix}: POST /v1/sandboxes {from_version} → same command through POST /processes + SSE to its end`,
    t2 - t0,
  );
  push(`${prefix}: · the claim`, t1 - t0);
  push(`${prefix}: · the command`, t2 - t1);
  await finished(r.t, (await req('DELETE', `/v1/envs/${env}`)).body.deployment.ID, 600_000);
}

try {
  if (ONLY.has('image')) {
    await sandboxRun(IMAGE, 'warm-up'); // the SDK's first connections, the engine's caches
    await sh('docker', ['run', '--rm', IMAGE, 'true']);
    for (let i = 0; i < Number(values.runs); i++) {
      loads.image.push(load());
      const pair = [
        () => sandboxRun(IMAGE, 'image'),
        async () =>
          push(
            `baseline: \`docker run --rm ${IMAGE} true\``,
            await timed(() => sh('docker', ['run', '--rm', IMAGE, 'true'])),
          ),
      ];
      for (let k = 0; k < 2; k++) await pair[(i + k) % 2]();
      console.error(
        `image ${i}: ${series["image: Sandbox.create → first commands.run('true') done"]?.at(-1)?.toFixed(0)} ms, docker run ${series[`baseline: \`docker run --rm ${IMAGE} true\``]?.at(-1)?.toFixed(0)} ms`,
      );
    }
  }
  if (ONLY.has('warm')) {
    const req = r.t.req;
    const tpl = (await req('GET', '/v1/templates')).body.templates.find(
      (x: { name: string }) => x.name === 'rl-environment-ops',
    );
    await req('POST', '/v1/projects', { body: { name: 'tpl', kind: tpl.kind } });
    const d = await finished(
      r.t,
      (await req('POST', '/v1/projects/tpl/deploy', { body: { compose: tpl.compose, warm: tpl.warm } })).body
        .deployment.ID,
    );
    if (d.deployment.Status !== 'succeeded') throw new Error(`deploy: ${d.deployment.Error}`);
    const ver = d.deployment.VersionID as string;
    await req('POST', `/v1/versions/${ver}/pool`, { body: { size: 2 } });
    const pool = async () => (await req('GET', `/v1/versions/${ver}/pool`)).body.pool;
    for (let i = -1; i < Number(values['warm-runs']); i++) {
      for (let w = 0; (await pool()).ready < 2 && w < 1500; w++)
        await new Promise((res) => setTimeout(res, 200));
      if (i >= 0) loads.warm.push(load());
      // Interleaved with the same claim through svc's own API, each on a full pool.
      const pair = [
        () => sandboxRun(ver, i < 0 ? 'warm-up' : 'warm'),
        () => svcClaim(ver, i < 0 ? 'warm-up' : 'svc'),
      ];
      await pair[(i + 2) % 2]();
      for (let w = 0; (await pool()).ready < 2 && w < 1500; w++)
        await new Promise((res) => setTimeout(res, 200));
      await pair[(i + 3) % 2]();
      if (i >= 0)
        console.error(
          `warm ${i}: ${series["warm: Sandbox.create → first commands.run('true') done"]?.at(-1)?.toFixed(0)} ms = create ${series['warm: · Sandbox.create']?.at(-1)?.toFixed(0)} + run ${series["warm: · commands.run('true')"]?.at(-1)?.toFixed(0)}`,
        );
    }
    await req('DELETE', `/v1/versions/${ver}/pool`);
  }
} finally {
  await r.close().catch((err) => console.error(`cleanup: ${err.message}`));
}
const range = (xs: number[]) =>
  xs.length ? `${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}` : '';
console.log(
  `\nE2B SDK: create → first command; 1-min load: image series ${range(loads.image)}, warm series ${range(loads.warm)}; now ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}\n\n| what | n | p50 ms | p99 ms |\n|---|---|---|---|`,
);
for (const [k, v] of Object.entries(series))
  if (!k.startsWith('warm-up'))
    console.log(`| ${k} | ${v.length} | ${pct(v, 50).toFixed(0)} | ${pct(v, 99).toFixed(0)} |`);
const img = series["image: Sandbox.create → first commands.run('true') done"];
const base = series[`baseline: \`docker run --rm ${IMAGE} true\``];
if (img && base)
  console.log(`\nimage ÷ docker run --rm (p50s): ${(pct(img, 50) / pct(base, 50)).toFixed(2)}x`);
process.exit(0);
