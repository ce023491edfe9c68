// Fork and snapshot of the rl-environment-ops template (agent + Postgres + Redis) through the API,
// with a real control plane, a real svcd and real Docker, beside a bare `docker compose up -d` of
// the same services (same images, commands and volumes; no depends_on, no healthchecks) measured
// in the same run, interleaved. The template's images are the test stand-ins (test/support/images.ts).
// --count N then forks the last snapshot N times in one request (fan-out) and reports when all N
// are healthy against the single fork's p50, checking that a write in one fork is in no other fork
// and not in the source.
//
// --runtime gvisor runs the stack under gVisor (x-svc.runtime; the bare baseline with `runtime:
// runsc`), for the runc-against-gVisor comparison.
// --cpu reports the CPU each single fork and the fan-out cost, by who spent it (bench/fork/cpu.ts):
// with 2 cores, N forks need at least N × (one fork's CPU) ÷ 2 of wall time whatever runs them.
//
//   node bench/fork/template.ts [--runs 5] [--xfs] [--count 32] [--runtime runc|gvisor] [--cpu]
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { parse, stringify } from 'yaml';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { exec, finished, type Real, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTemplateImages } from '../../test/support/images.ts';
import { cpuMark, cpuSince } from './cpu.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    xfs: { type: 'boolean', default: false },
    count: { type: 'string', default: '0' },
    runtime: { type: 'string', default: 'runc' },
    cpu: { type: 'boolean', default: false },
  },
});
if (values.runtime !== 'runc' && values.runtime !== 'gvisor') throw new Error('--runtime: runc or gvisor');
const GVISOR = values.runtime === 'gvisor';
// --xfs: the sidecar keeps its datasets on its own XFS image (the --dev default).
if (values.xfs) process.env.SVC_XFS_LOOP = 'auto';
const RUNS = Math.max(1, Number(values.runs));
const COUNT = Math.min(100, Math.max(0, Number(values.count)));

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil((p / 100) * xs.length) - 1];

function sh(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, { maxBuffer: 16 << 20 }, (err, _o, e) =>
      err ? reject(new Error(e || err.message)) : resolve(),
    ),
  );
}

/** The template's services without depends_on, healthchecks and svc extensions. */
function bareCompose(text: string): string {
  const doc = parse(text) as Record<string, any>;
  for (const k of Object.keys(doc)) if (k.startsWith('x-')) delete doc[k];
  for (const s of Object.values(doc.services as Record<string, any>)) {
    delete s.depends_on;
    delete s.healthcheck;
    if (GVISOR) s.runtime = 'runsc';
  }
  return stringify(doc);
}

/** The template's compose, under gVisor when --runtime gvisor asks. */
function underRuntime(text: string): string {
  if (!GVISOR) return text;
  const doc = parse(text) as Record<string, any>;
  doc['x-svc'] = { ...(doc['x-svc'] ?? {}), runtime: 'gvisor' };
  return stringify(doc);
}

await ensureTemplateImages(); // busybox too
if (process.env.BENCH_LOG) process.on('exit', () => console.error(r?.log()));
const r = await startReal();
const dir = mkdtempSync(join(tmpdir(), 'svc-bench-tpl-'));
const fork: number[] = [];
const forkedIn: number[] = [];
const bare: number[] = [];
const snapshot: number[] = [];
const frozen: number[] = [];
/** Inside frozen_for (the snapshot's own timings): pause, capture, unpause; and the same-run raw freeze. */
const inFreeze: Record<string, number[]> = {
  pause: [],
  capture: [],
  unpause: [],
  rawPause: [],
  rawUnpause: [],
};
const docker = new Docker();
const rawIds: string[] = [];
// The deployment's own span (created → finished), free of the harness's 200 ms polling.
const snapshotServer: number[] = [];
const forkServer: number[] = [];
const took = (d: { CreatedAt: string; FinishedAt: string }) =>
  Date.parse(d.FinishedAt) - Date.parse(d.CreatedAt);
let fanOut: { wall: number; healthy: number; slowest: number; independent: boolean } | null = null;

/**
 * `count` forks of `version` in one request: wall time until every fork's deployment finished,
 * how many are healthy, and whether a write in the first is absent from the second and the source.
 */
async function fanOutRun(real: Real, env: string, version: string, count: number) {
  const mark = values.cpu ? cpuMark(real.sidecar.pid ?? 0) : null;
  const t0 = Date.now();
  const started = await real.t.req('POST', `/v1/envs/${env}/fork`, { body: { version, count, name: 'fan' } });
  if (started.status !== 202) throw new Error(`fan-out: ${JSON.stringify(started.body)}`);
  const forks = started.body.forks.filter((f: any) => f.deployment);
  const done = await Promise.all(forks.map((f: any) => finished(real.t, f.deployment.ID, 1_200_000)));
  const wall = Date.now() - t0;
  if (mark)
    console.error(
      `fan-out CPU (core-ms): ${JSON.stringify(await cpuSince(mark, real.sidecar.pid ?? 0, docker))}`,
    );
  const ok = done.filter((d) => d.deployment.Status === 'succeeded').map((d) => d.deployment.EnvID);
  let independent = false;
  if (ok.length >= 2) {
    await exec(real.t, ok[0], 'main', ['sh', '-c', 'echo first > /work/fan-out-mark']);
    const absent = async (id: string) =>
      (await exec(real.t, id, 'main', ['sh', '-c', 'test -e /work/fan-out-mark; echo $?'])).stdout === '1\n';
    independent = (await absent(ok[1])) && (await absent(env));
  }
  const slowest = Math.max(...done.map((d) => took(d.deployment)));
  for (const d of done)
    await finished(real.t, (await real.t.req('DELETE', `/v1/envs/${d.deployment.EnvID}`)).body.deployment.ID);
  return { wall, healthy: ok.length, slowest, independent };
}
try {
  const tpl = (await r.t.req('GET', '/v1/templates')).body.templates.find(
    (x: any) => x.name === 'rl-environment-ops',
  );
  for (let i = 0; i < 3; i++) {
    const c = await docker.createContainer({
      Image: BUSYBOX_IMAGE,
      Cmd: ['sleep', '3600'],
      HostConfig: { AutoRemove: true, NetworkMode: 'none' },
    });
    await c.start();
    rawIds.push(c.id);
  }
  const file = join(dir, 'compose.yaml');
  writeFileSync(file, bareCompose(tpl.compose));
  await r.t.req('POST', '/v1/projects', { body: { name: 'tpl', kind: tpl.kind } });
  const t0 = Date.now();
  const d = await finished(
    r.t,
    (
      await r.t.req('POST', '/v1/projects/tpl/deploy', {
        body: { compose: underRuntime(tpl.compose), warm: tpl.warm },
      })
    ).body.deployment.ID,
  );
  if (d.deployment.Status !== 'succeeded') throw new Error(`deploy: ${d.deployment.Error}\n${r.log()}`);
  console.error(`deploy: ${Date.now() - t0} ms`);
  const env = d.deployment.EnvID;
  let version = '';
  for (let i = 0; i < RUNS; i++) {
    const s0 = Date.now();
    const s = await finished(
      r.t,
      (await r.t.req('POST', `/v1/envs/${env}/snapshot`, { body: {} })).body.deployment.ID,
    );
    if (s.deployment.Status !== 'succeeded') throw new Error(`snapshot: ${s.deployment.Error}`);
    snapshot.push(Date.now() - s0);
    snapshotServer.push(took(s.deployment));
    const ev = s.phases.find((p: any) => p.Evidence?.frozen_for !== undefined)?.Evidence;
    frozen.push(ev?.frozen_for ?? Number.NaN);
    for (const k of ['pause', 'capture', 'unpause']) inFreeze[k].push(ev?.timings?.[k] ?? Number.NaN);
    // The same freeze done raw right after: three idle containers of the bench's own, paused and
    // thawed in parallel through the Engine API.
    const raws = rawIds.map((id) => docker.getContainer(id));
    const p0 = performance.now();
    await Promise.all(raws.map((c) => c.pause()));
    const p1 = performance.now();
    await Promise.all(raws.map((c) => c.unpause()));
    inFreeze.rawPause.push(Math.round(p1 - p0));
    inFreeze.rawUnpause.push(Math.round(performance.now() - p1));
    version = s.deployment.VersionID;

    const mark = values.cpu ? cpuMark(r.sidecar.pid ?? 0) : null;
    const f0 = Date.now();
    const f = await finished(
      r.t,
      (await r.t.req('POST', `/v1/envs/${env}/fork`, { body: { version, name: `f${i}` } })).body.deployment
        .ID,
    );
    if (f.deployment.Status !== 'succeeded') throw new Error(`fork: ${f.deployment.Error}\n${r.log()}`);
    fork.push(Date.now() - f0);
    forkServer.push(took(f.deployment));
    forkedIn.push(f.phases.find((p: any) => p.Evidence?.forked_in_ms !== undefined)?.Evidence.forked_in_ms);
    if (mark)
      console.error(
        `run ${i} fork CPU (core-ms): ${JSON.stringify(await cpuSince(mark, r.sidecar.pid ?? 0, docker))}`,
      );
    await finished(r.t, (await r.t.req('DELETE', `/v1/envs/${f.deployment.EnvID}`)).body.deployment.ID);

    const project = `svcbenchbare${process.pid}x${i}`;
    const b0 = Date.now();
    await sh('docker', ['compose', '-p', project, '-f', file, 'up', '-d', '--quiet-pull']);
    bare.push(Date.now() - b0);
    await sh('docker', ['compose', '-p', project, '-f', file, 'down', '-v', '-t', '0']);
    console.error(
      `run ${i} (load ${loadavg()[0].toFixed(1)}): snapshot ${snapshot.at(-1)} ms (frozen ${frozen.at(-1)} ms = pause ${inFreeze.pause.at(-1)} + capture ${inFreeze.capture.at(-1)} + unpause ${inFreeze.unpause.at(-1)}; raw pause ${inFreeze.rawPause.at(-1)}, unpause ${inFreeze.rawUnpause.at(-1)}), fork ${fork.at(-1)} ms (forked_in ${forkedIn.at(-1)} ms), bare up -d ${bare.at(-1)} ms`,
    );
  }
  if (COUNT > 0) {
    fanOut = await fanOutRun(r, env, version, COUNT);
    console.error(`fork --count ${COUNT}: ${fanOut.healthy} healthy, all done in ${fanOut.wall} ms`);
  }
  const host = (await r.t.req('GET', '/v1/hosts')).body.hosts[0];
  console.error(`storage: ${host.Capabilities.storage}, copy-on-write: ${host.Capabilities.cow}`);
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
  rmSync(r.dir, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
}
const row = (name: string, xs: number[]) => `| ${name} | ${pct(xs, 50)} ms | ${pct(xs, 100)} ms |`;
console.log(
  `\nrl-environment-ops template, ${RUNS} runs (interleaved), data dir on ${values.xfs ? "svcd's XFS image" : 'the temp dir'}\n`,
);
console.log('| what | p50 | max |\n|---|---|---|');
console.log(row('fork through the API (deployment wall time)', fork));
console.log(row('fork deployment, created → finished (server clock)', forkServer));
console.log(row('forked_in (sidecar: clone + start + health + egress probe)', forkedIn));
console.log(row('baseline: bare `docker compose up -d`, same services', bare));
console.log(row('snapshot through the API (deployment wall time)', snapshot));
console.log(row('snapshot deployment, created → finished (server clock)', snapshotServer));
console.log(row('frozen_for', frozen));
console.log(row('· of which: pause (3 containers, parallel)', inFreeze.pause));
console.log(row('· of which: capture (reflink of the disk image)', inFreeze.capture));
console.log(row('· of which: unpause', inFreeze.unpause));
console.log(
  row('baseline: raw pause of 3 idle busybox containers (Engine API, parallel)', inFreeze.rawPause),
);
console.log(row('baseline: raw unpause of the same', inFreeze.rawUnpause));
console.log(
  `load average at the end: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(`fork p50 / bare p50 = ${(pct(fork, 50) / pct(bare, 50)).toFixed(2)}x`);
if (fanOut) {
  console.log(
    `\nfork --count ${COUNT}: ${fanOut.healthy} of ${COUNT} healthy in ${fanOut.wall} ms (slowest deployment ${fanOut.slowest} ms), ` +
      `${(fanOut.wall / pct(fork, 50)).toFixed(2)}x one fork's p50; a write in one fork absent from another and the source: ${fanOut.independent}`,
  );
}
process.exit(0);
