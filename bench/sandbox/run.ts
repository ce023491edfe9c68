// Create → first exec through the API, the figure a training loop feels: an image sandbox, a cold
// `from_version` fork of the rl-environment-ops template stack and a warm-pool claim of it; beside
// `docker run --rm <image> true` and `docker compose up -d --wait` of the same stack (stand-in
// images, its own healthchecks and depends_on) measured in the same run. Real control plane, real
// svcd (datasets on its own XFS image, the --dev default), real Docker.
//
//   node bench/sandbox/run.ts [--runs 5] [--only warm|image] [--spares off]
//
// Every image sandbox is profiled phase by phase (bench/sandbox/profile.ts: the deployment's phases,
// the command rows and the host's own steps), printed as medians and shares of the total.
// `--only image` runs the image series and its `docker run --rm` baseline only, interleaved.
// `--only warm` skips the cold series and its baselines; the warm series also prints where a
// claim → first exec went (bench/sandbox/split.ts) beside the same Docker work done raw, and a
// second exec 250 ms after the first (a loop's next command, by then on the spare exec the first
// one left behind). `--spares off` runs svcd with SVC_EXEC_SPARES=off: every exec a plain one.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parse, stringify } from 'yaml';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { finished, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTemplateImages } from '../../test/support/images.ts';
import { type Profile, sandboxProfile } from './profile.ts';
import { commandSplit, rawSplit, SPLIT_KEYS, SPLIT_LABELS, type Split } from './split.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    only: { type: 'string', default: 'all' },
    spares: { type: 'string', default: 'on' },
  },
});
process.env.SVC_EXEC_SPARES = values.spares;
const RUNS = Math.max(1, Number(values.runs));
const COLD = values.only !== 'warm';
const IMAGE_ONLY = values.only === 'image';
process.env.SVC_XFS_LOOP = 'auto';
/** Ends the measuring early (`--only image`) and goes on to the cleanup and the report. */
class Done extends Error {}
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];

function sh(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { maxBuffer: 16 << 20 }, (err, _o, e) =>
      err ? reject(new Error(e || err.message)) : resolve(),
    ),
  );
}
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

await ensureTemplateImages();
const r = await startReal();
const dir = mkdtempSync(join(tmpdir(), 'svc-bench-sbx-'));
const series: Record<string, number[]> = {
  image: [],
  cold: [],
  warm: [],
  claim: [],
  firstExec: [],
  execOnly: [],
  dockerRun: [],
  composeWait: [],
};
const profiles: Profile[] = [];
const loads: number[] = [];
try {
  const req = r.t.req;
  const exec = async (env: string) => {
    const x = await req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd: ['true'] } });
    if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(x.body)}`);
  };
  const sandbox = async (body: unknown) => {
    const c = await req('POST', '/v1/sandboxes', { body });
    if (c.status !== 201) throw new Error(`sandbox: ${c.status} ${JSON.stringify(c.body).slice(0, 400)}`);
    await exec(c.body.environment.ID);
    return c.body.environment.ID as string;
  };
  const destroy = async (env: string) =>
    finished(r.t, (await req('DELETE', `/v1/envs/${env}`)).body.deployment.ID, 600_000);

  const tpl = (await req('GET', '/v1/templates')).body.templates.find(
    (x: any) => x.name === 'rl-environment-ops',
  );
  await req('POST', '/v1/projects', { body: { name: 'tpl', kind: tpl.kind } });
  const d = await finished(
    r.t,
    (await req('POST', '/v1/projects/tpl/deploy', { body: { compose: tpl.compose, warm: tpl.warm } })).body
      .deployment.ID,
  );
  if (d.deployment.Status !== 'succeeded') throw new Error(`deploy: ${d.deployment.Error}`);
  const ver = d.deployment.VersionID;
  const doc = parse(tpl.compose) as Record<string, unknown>;
  for (const k of Object.keys(doc)) if (k.startsWith('x-')) delete doc[k];
  const file = join(dir, 'compose.yaml');
  writeFileSync(file, stringify(doc));
  const pool = async () => (await req('GET', `/v1/versions/${ver}/pool`)).body.pool;
  for (let i = 0; i < (COLD ? RUNS : 0); i++) {
    let env = '';
    loads.push(loadavg()[0]);
    const post = Date.now();
    const c = await req('POST', '/v1/sandboxes', {
      body: { image: BUSYBOX_IMAGE, cmd: ['sleep', '3600'], volumes: [] },
    });
    const created = Date.now();
    if (c.status !== 201) throw new Error(`sandbox: ${c.status} ${JSON.stringify(c.body).slice(0, 400)}`);
    env = c.body.environment.ID;
    await exec(env);
    const t = { post, created, exec: Date.now() };
    series.image.push(t.exec - t.post);
    profiles.push(await sandboxProfile(r.t.server.ctx.db, c.body.deployment.ID, env, t));
    await destroy(env);
    series.dockerRun.push(
      await timed(() => sh('docker', ['run', '--rm', '--network', 'none', BUSYBOX_IMAGE, 'true'])),
    );
    if (IMAGE_ONLY) {
      console.error(
        `run ${i} (load ${loads.at(-1)?.toFixed(1)}): image ${series.image.at(-1)} ms, dockerRun ${series.dockerRun.at(-1)?.toFixed(0)} ms`,
      );
      continue;
    }
    series.cold.push(
      await timed(async () => {
        env = await sandbox({ from_version: ver, name: `cold-${i}` });
      }),
    );
    await destroy(env);
    const project = `svcbenchsbx${process.pid}x${i}`;
    series.composeWait.push(
      await timed(() => sh('docker', ['compose', '-p', project, '-f', file, 'up', '-d', '--wait'])),
    );
    await sh('docker', ['compose', '-p', project, '-f', file, 'down', '-v', '-t', '0']);
    console.error(
      `run ${i}: ${['image', 'cold', 'dockerRun', 'composeWait'].map((k) => `${k} ${series[k].at(-1)?.toFixed(0)} ms`).join(', ')}`,
    );
  }
  // Warm claims: a pool of 2 (members paused), refilled between claims.
  if (IMAGE_ONLY) throw new Done();
  await req('POST', `/v1/versions/${ver}/pool`, { body: { size: 2 } });
  for (let i = 0; i < RUNS; i++) {
    for (let w = 0; (await pool()).ready < 2 && w < 900; w++)
      await new Promise((res) => setTimeout(res, 200));
    const t0 = performance.now();
    const c = await req('POST', '/v1/sandboxes', { body: { from_version: ver, name: `warm-${i}` } });
    const t1 = performance.now();
    if (c.status !== 201) throw new Error(`claim: ${c.status} ${JSON.stringify(c.body).slice(0, 400)}`);
    const env = c.body.environment.ID as string;
    await exec(env);
    const t2 = performance.now();
    series.claim.push(t1 - t0);
    series.firstExec.push(t2 - t1);
    series.warm.push(t2 - t0);
    const cp = await commandSplit(r.t.server.ctx.db, env);
    await new Promise((res) => setTimeout(res, 250));
    const t3 = performance.now();
    await exec(env);
    series.execOnly.push(performance.now() - t3);
    await new Promise((res) => setTimeout(res, 300)); // the spare that exec left behind starts
    const split: Split = { ...cp, ...(await rawSplit(env)) };
    for (const k of SPLIT_KEYS) series[k] = [...(series[k] ?? []), split[k]];
    await destroy(env);
    console.error(
      `warm ${i}: ${series.warm.at(-1)?.toFixed(0)} ms = claim ${(t1 - t0).toFixed(0)} + first exec ${(t2 - t1).toFixed(0)} (a later exec ${series.execOnly.at(-1)?.toFixed(0)} ms); ${JSON.stringify(split, (_k, v) => (typeof v === 'number' ? Math.round(v) : v))}`,
    );
  }
  await req('DELETE', `/v1/versions/${ver}/pool`);
} catch (err) {
  if (!(err instanceof Done)) throw err;
} finally {
  await r.close().catch((err) => console.error(`cleanup: ${err.message}`));
  await closeXfsLoop(r.dataDir);
  rmSync(r.dir, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
}
const label: Record<string, string> = {
  image: 'image sandbox (busybox): POST /v1/sandboxes → first exec',
  cold: 'template stack, cold `from_version` fork → first exec',
  warm: 'template stack, warm-pool claim (thaw) → first exec',
  claim: 'of which: the claim (`POST /v1/sandboxes {from_version}`)',
  firstExec: 'of which: the first exec through the API',
  execOnly: 'a second exec through the API, 250 ms after the first',
  ...(SPLIT_LABELS as Record<keyof Split, string>),
  dockerRun: 'baseline: `docker run --rm busybox true`',
  composeWait: 'baseline: `docker compose up -d --wait` of the template stack',
};
console.log(
  `\ncreate → first exec, ${RUNS} runs each, spare execs ${values.spares}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      ' ',
    )} (cold series interleaved with the baselines, then the warm series)\n\n| what | p50 | p99 (max) |\n|---|---|---|`,
);
for (const [k, v] of Object.entries(series))
  if (v.length) console.log(`| ${label[k]} | ${pct(v, 50).toFixed(0)} ms | ${pct(v, 99).toFixed(0)} ms |`);
if (series.image.length && series.dockerRun.length)
  console.log(
    `\nimage sandbox ÷ docker run --rm (p50s): ${(pct(series.image, 50) / pct(series.dockerRun, 50)).toFixed(2)}x; 1-min load average at each run's start: ${loads.map((l) => l.toFixed(1)).join(', ')}`,
  );
if (profiles.length) {
  const total = pct(
    profiles.map((p) => p.total),
    50,
  );
  console.log(
    `\nimage sandbox profile, p50 over ${profiles.length} runs (share of the total's p50; host steps may overlap)\n\n| step | p50 ms | share |\n|---|---|---|`,
  );
  const keys = [...new Set(profiles.flatMap((p) => Object.keys(p)))];
  for (const k of keys) {
    const v = profiles.map((p) => p[k]).filter((x) => Number.isFinite(x));
    if (!v.length) continue;
    const m = pct(v, 50);
    console.log(`| ${k} | ${m.toFixed(0)} | ${((100 * m) / total).toFixed(0)}% |`);
  }
}
process.exit(0);
