// Warm-pool claim → first exec of the template stack while the pool refills, beside the same claim
// with the host quiet, interleaved in one run. A pool of 2 (members paused): a "quiet" claim is
// taken with both members ready and nothing else running; a "refilling" claim is taken right after
// another claim, once that claim's replacement fork is running (pool `starting` ≥ 1) plus an offset
// that walks through the fork's phases (clone, compose, container starts, health, pause). Real
// control plane, real svcd (datasets on its XFS image, the --dev default), real Docker.
//
//   node bench/sandbox/claim.ts [--runs 6] [--db sqlite|postgres] [--size 2]
//
// Per claim: the claim (POST /v1/sandboxes {from_version}), its first exec, the env.unpause and
// env.exec command rows (created → finished, server clock), and the raw Docker unpause / exec of
// three idle busybox containers of the bench's own right after, the same-run baseline (not the
// claimed stack's: svcd may be starting a spare exec there, and a pause that freezes an exec's
// `runc init` deadlocks Docker 20.10).
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { sleep } from '../../shared/concurrency.ts';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { finished, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTemplateImages } from '../../test/support/images.ts';
import { rawExec } from '../exec/baseline.ts';
import { commandSplit } from './split.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '6' },
    db: { type: 'string', default: 'sqlite' },
    offsets: { type: 'string', default: '0,400,900,1500,2500' },
  },
});
const RUNS = Math.max(1, Number(values.runs));
const OFFSETS = values.offsets.split(',').map(Number);
process.env.SVC_XFS_LOOP = 'auto';
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];

await ensureTemplateImages();
const r = await startReal({ dialect: values.db === 'postgres' ? 'postgres' : 'sqlite' });
type Row = {
  claim: number;
  exec: number;
  unpauseRow: number;
  execRow: number;
  rawUnpause: number;
  rawExec: number;
  load: number;
};
const docker = new Docker();
const rawIds: string[] = [];
for (let i = 0; i < 3; i++) {
  const c = await docker.createContainer({
    Image: BUSYBOX_IMAGE,
    Cmd: ['sleep', '3600'],
    HostConfig: { AutoRemove: true, NetworkMode: 'none' },
    Labels: { 'svc.bench': 'claim' },
  });
  await c.start();
  rawIds.push(c.id);
}
async function rawSplit(_env: string) {
  const cs = rawIds.map((id) => docker.getContainer(id));
  await Promise.all(cs.map((c) => c.pause()));
  const t0 = performance.now();
  await Promise.all(cs.map((c) => c.unpause()));
  const t1 = performance.now();
  await rawExec(cs[0]);
  return { rawUnpause: t1 - t0, rawExec: performance.now() - t1 };
}
const rows: Record<'quiet' | 'refilling', Row[]> = { quiet: [], refilling: [] };
try {
  const req = r.t.req;
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
  const pool = async () => (await req('GET', `/v1/versions/${ver}/pool`)).body.pool;
  const full = async () => {
    for (let w = 0; w < 1500; w++) {
      const p = await pool();
      if (p.ready >= 2 && p.starting === 0) return;
      await sleep(200);
    }
    throw new Error('the pool did not fill in 5 minutes');
  };
  const destroy = async (env: string) =>
    finished(r.t, (await req('DELETE', `/v1/envs/${env}`)).body.deployment.ID, 600_000);
  const claim = async (name: string): Promise<{ env: string; claim: number; exec: number }> => {
    const t0 = performance.now();
    const c = await req('POST', '/v1/sandboxes', { body: { from_version: ver, name } });
    const t1 = performance.now();
    if (c.status !== 201) throw new Error(`claim: ${c.status} ${JSON.stringify(c.body).slice(0, 400)}`);
    const env = c.body.environment.ID as string;
    const x = await req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd: ['true'] } });
    if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(x.body)}`);
    return { env, claim: t1 - t0, exec: performance.now() - t1 };
  };
  const measured = async (kind: 'quiet' | 'refilling', name: string, load: number) => {
    const c = await claim(name);
    const cp = await commandSplit(r.t.server.ctx.db, c.env);
    return { c, cp, load, kind };
  };
  await req('POST', `/v1/versions/${ver}/pool`, { body: { size: 2 } });
  for (let i = 0; i < RUNS; i++) {
    for (const kind of i % 2 ? (['refilling', 'quiet'] as const) : (['quiet', 'refilling'] as const)) {
      await full();
      await sleep(1000);
      const load = loadavg()[0];
      let m: Awaited<ReturnType<typeof measured>>;
      const envs: string[] = [];
      if (kind === 'quiet') m = await measured(kind, `q-${i}`, load);
      else {
        envs.push((await claim(`a-${i}`)).env);
        for (let w = 0; (await pool()).starting < 1 && w < 200; w++) await sleep(20);
        await sleep(OFFSETS[i % OFFSETS.length]);
        m = await measured(kind, `r-${i}`, load);
      }
      envs.push(m.c.env);
      const raw = await rawSplit(m.c.env);
      rows[kind].push({
        claim: m.c.claim,
        exec: m.c.exec,
        unpauseRow: m.cp.cpUnpause,
        execRow: m.cp.cpExec,
        rawUnpause: raw.rawUnpause,
        rawExec: raw.rawExec,
        load,
      });
      console.error(
        `${kind} ${i}${kind === 'refilling' ? ` (+${OFFSETS[i % OFFSETS.length]} ms)` : ''}: claim ${m.c.claim.toFixed(0)} + exec ${m.c.exec.toFixed(0)} ms; unpause row ${m.cp.cpUnpause}, exec row ${m.cp.cpExec}; raw unpause ${raw.rawUnpause.toFixed(0)}, raw exec ${raw.rawExec.toFixed(0)}; load ${load.toFixed(2)}`,
      );
      for (const env of envs) await destroy(env);
    }
  }
  await req('DELETE', `/v1/versions/${ver}/pool`);
} finally {
  await r.close().catch((err) => console.error(`cleanup: ${err.message}`));
  await closeXfsLoop(r.dataDir);
  await Promise.all(
    rawIds.map((id) =>
      docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
}
const cols: Array<[keyof Row, string]> = [
  ['claim', 'claim'],
  ['exec', 'first exec'],
  ['unpauseRow', 'env.unpause row'],
  ['execRow', 'env.exec row'],
  ['rawUnpause', 'raw unpause (3, parallel)'],
  ['rawExec', 'raw exec `true`'],
];
console.log(
  `\nwarm claim → first exec, ${values.db}, ${RUNS} of each, interleaved; load average at the end ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      ' ',
    )}\n\n| ms, p50 / max | claim + first exec | ${cols.map((c) => c[1]).join(' | ')} | 1-min load at start |\n|---|---|${cols.map(() => '---').join('|')}|---|`,
);
for (const [kind, rs] of Object.entries(rows)) {
  if (!rs.length) continue;
  const f = (xs: number[]) => `${pct(xs, 50).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;
  console.log(
    `| ${kind} | **${f(rs.map((x) => x.claim + x.exec))}** | ${cols.map(([k]) => f(rs.map((x) => x[k]))).join(' | ')} | ${rs.map((x) => x.load.toFixed(1)).join(', ')} |`,
  );
}
process.exit(0);
