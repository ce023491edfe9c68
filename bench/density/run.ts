// Density: N concurrent image sandboxes on one host, each a whole lifecycle through the API
// (POST /v1/sandboxes with a busybox image → exec → DELETE and wait), with a real control plane,
// a real svcd and real Docker. Reported per N: lifecycles that succeeded, lifecycles/s, p50/p99 of
// one lifecycle and of its steps, CPU per lifecycle by process (control plane, svcd, svcd's
// children: compose, iptables, the egress probe; dockerd; containerd and its shims), the load
// average, every failure's reason, and what was left behind (containers, networks, volumes,
// firewall rules, datasets, loop devices). Same-run baseline: N concurrent
// `docker run --rm --network none <image> true` (no network of their own, no API).
//
// POST /v1/sandboxes answers when the sandbox is healthy (spec), so the client waits up to the
// benchmark's deadline (--deadline-sec, also sent as timeout_sec), not fetch's 300 s.
//
// With --hold every sandbox waits, after its exec, until all N were created before it is destroyed,
// so N sandboxes are alive at once (the peak is reported).
//
//   node bench/density/run.ts [--sizes 50,100,200] [--hold] [--deadline-sec 1800] [--workers K] [--store xfs|dir]
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import { backoff, sleep } from '../../shared/concurrency.ts';
import { startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import {
  type CpuSample,
  call,
  cpuPerLifecycle,
  leaks,
  loopDevices,
  machineCpu,
  sampleCpu,
} from './measure.ts';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '50,100,200' },
    'deadline-sec': { type: 'string', default: '1800' },
    workers: { type: 'string' },
    store: { type: 'string', default: 'xfs' },
    // Every sandbox stays up until all N were created (and exec'd): N alive at once on the host.
    hold: { type: 'boolean', default: false },
  },
});
const SIZES = values.sizes.split(',').map(Number);
const DEADLINE_MS = Number(values['deadline-sec']) * 1000;
// svcd inherits these: the XFS store is what `svc-server --dev` runs; `dir` puts each env's
// volumes in an ext4 image of its own on this ext4 machine.
if (values.store === 'xfs') process.env.SVC_XFS_LOOP = 'auto';
if (values.workers) process.env.SVC_STACK_WORKERS = values.workers;

const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] : Number.NaN;

function dockerRun(): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile('docker', ['run', '--rm', '--network', 'none', BUSYBOX_IMAGE, 'true'], (err, _o, e) =>
      err ? reject(new Error(e || err.message)) : resolve(),
    ),
  );
}

interface Row {
  n: number;
  ok: number;
  failures: Map<string, number>;
  wallMs: number;
  times: number[];
  steps: Record<'create' | 'exec' | 'destroy', number[]>;
  /** The create deployment's phases: name → durations (ms). */
  phases: Map<string, number[]>;
  leaks: string[];
  cpu: Record<string, number>;
  load: [string, string];
  base: { wallMs: number; times: number[]; failed: number; machineMs: number };
  alive: number;
  peak: number;
  /** Resolves once every lifecycle has created its sandbox or failed (--hold). */
  created: Promise<void>;
  arrived: () => void;
}

await ensureTestImages();
const r = await startReal();
const req = (method: string, path: string, body?: unknown) =>
  call(r.t.url, r.t.key, method, path, body, DEADLINE_MS);
const rows: Row[] = [];

/** Polls the deployment as a user would (backing off to 1 s, so 200 pollers cost the host little). */
async function finished(id: string): Promise<{ Status: string; Error: string }> {
  const end = Date.now() + DEADLINE_MS;
  for (let n = 0; Date.now() < end; n++) {
    const g = await req('GET', `/v1/deployments/${id}`);
    if (g.body?.deployment?.FinishedAt) return g.body.deployment;
    await sleep(backoff(n, { baseMs: 250, capMs: 1000, jitter: 0.2 }));
  }
  throw new Error(`deployment ${id} did not finish within the bench deadline`);
}

/** Where the create deployment spent its time, phase by phase. */
async function phaseTimes(dep: string, row: Row): Promise<void> {
  const g = await req('GET', `/v1/deployments/${dep}`);
  for (const ph of (g.body?.phases ?? []) as {
    Name: string;
    StartedAt: string | null;
    FinishedAt: string | null;
  }[]) {
    if (!ph.StartedAt || !ph.FinishedAt) continue;
    const list = row.phases.get(ph.Name) ?? [];
    list.push(Date.parse(ph.FinishedAt) - Date.parse(ph.StartedAt));
    row.phases.set(ph.Name, list);
  }
}

async function lifecycle(n: number, i: number, row: Row, envs: string[]): Promise<void> {
  const t0 = Date.now();
  let step: keyof Row['steps'] = 'create';
  let arrived = false;
  const arrive = () => {
    if (!arrived) row.arrived();
    arrived = true;
  };
  try {
    const c = await req('POST', '/v1/sandboxes', {
      image: BUSYBOX_IMAGE,
      cmd: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'],
      name: `d${n}-${i}`,
      volumes: [],
      timeout_sec: Math.ceil(DEADLINE_MS / 1000),
    });
    if (c.body?.environment?.ID) envs.push(c.body.environment.ID);
    if (c.status !== 201) throw new Error(`${c.status} ${JSON.stringify(c.body).slice(0, 300)}`);
    const env = c.body.environment.ID as string;
    const t1 = Date.now();
    await phaseTimes(c.body.deployment.ID, row);
    row.steps.create.push(t1 - t0);
    row.peak = Math.max(row.peak, ++row.alive);
    arrive();
    step = 'exec';
    const x = await req('POST', `/v1/envs/${env}/exec`, { service: 'main', cmd: ['true'] });
    if (x.status !== 200 || x.body.exit_code !== 0)
      throw new Error(`${x.status} ${JSON.stringify(x.body).slice(0, 300)}`);
    const t2 = Date.now();
    row.steps.exec.push(t2 - t1);
    if (values.hold) await row.created;
    step = 'destroy';
    const d = await req('DELETE', `/v1/envs/${env}`);
    if (d.status !== 202) throw new Error(`${d.status} ${JSON.stringify(d.body).slice(0, 300)}`);
    const done = await finished(d.body.deployment.ID);
    if (done.Status !== 'succeeded') throw new Error(String(done.Error));
    row.steps.destroy.push(Date.now() - t2);
    row.alive--;
    row.times.push(Date.now() - t0);
    row.ok++;
  } catch (err) {
    arrive();
    // Ids and counters differ between failures; the reason is what is left once they are masked.
    const why = `${step}: ${(err as Error).message}`.replace(/\b(env|dep|ver)_\w+/g, '$1_…');
    row.failures.set(why, (row.failures.get(why) ?? 0) + 1);
  }
}

try {
  for (const n of SIZES) {
    const envs: string[] = [];
    const row: Row = {
      n,
      ok: 0,
      failures: new Map(),
      wallMs: 0,
      times: [],
      steps: { create: [], exec: [], destroy: [] },
      phases: new Map(),
      leaks: [],
      cpu: {},
      load: ['', ''],
      base: { wallMs: 0, times: [], failed: 0, machineMs: 0 },
      alive: 0,
      peak: 0,
      created: Promise.resolve(),
      arrived: () => {},
    };
    let pending = n;
    row.created = new Promise<void>((resolve) => {
      row.arrived = () => {
        if (--pending === 0) resolve();
      };
    });
    const pid = r.sidecar.pid ?? 0;
    const before: CpuSample = sampleCpu(pid);
    const w0 = Date.now();
    await Promise.all(Array.from({ length: n }, (_, i) => lifecycle(n, i, row, envs)));
    row.wallMs = Date.now() - w0;
    const after = sampleCpu(pid);
    row.cpu = cpuPerLifecycle(before, after, n);
    row.load = [before.load, after.load];
    row.leaks = leaks(envs, r.dataDir, r.dir);
    const b0 = Date.now();
    const m0 = machineCpu();
    await Promise.all(
      Array.from({ length: n }, async () => {
        const t0 = Date.now();
        try {
          await dockerRun();
          row.base.times.push(Date.now() - t0);
        } catch {
          row.base.failed++;
        }
      }),
    );
    row.base.wallMs = Date.now() - b0;
    row.base.machineMs = Math.round(((machineCpu() - m0) * 1000) / n);
    rows.push(row);
    const p = (xs: number[]) => `p50 ${pct(xs, 50)} p99 ${pct(xs, 99)}`;
    console.error(
      `N=${n}${values.hold ? ' (held)' : ''}: ${row.ok}/${n} ok in ${row.wallMs} ms, peak ${row.peak} alive; ${p(row.times)}; create ${p(row.steps.create)}; exec ${p(row.steps.exec)}; destroy ${p(row.steps.destroy)}`,
    );
    console.error(
      `  create phases (p50/p99 ms): ${[...row.phases].map(([k, v]) => `${k} ${pct(v, 50)}/${pct(v, 99)}`).join(', ')}`,
    );
    console.error(`  CPU ms per lifecycle ${JSON.stringify(row.cpu)}; load ${row.load[0]} → ${row.load[1]}`);
    console.error(
      `  left behind: ${row.leaks.length}${row.leaks.length ? `: ${row.leaks.slice(0, 10).join('; ')}` : ''}`,
    );
    for (const [why, count] of row.failures) console.error(`  failure ×${count}: ${why}`);
  }
} finally {
  await r.close();
}
const loopsAfter = loopDevices(r.dir);
console.error(
  `loop devices of this run left after svcd stopped: ${loopsAfter.length ? loopsAfter.join('; ') : 'none'}`,
);
const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
console.log(
  '\n| N | succeeded | lifecycles/s | p50 | p99 | create p50 | destroy p50 | CPU ms/lifecycle (cp, svcd, svcd children, dockerd, containerd, whole machine) | left behind | load before → after | baseline `docker run --rm` N at once: runs/s, p50, p99, whole machine CPU ms/run |',
);
console.log('|---|---|---|---|---|---|---|---|---|---|---|');
for (const x of rows)
  console.log(
    `| ${x.n} | ${x.ok}/${x.n} | ${((x.ok / x.wallMs) * 1000).toFixed(2)} | ${s(pct(x.times, 50))} | ${s(pct(x.times, 99))} | ${s(pct(x.steps.create, 50))} | ${s(pct(x.steps.destroy, 50))} | ${Object.values(x.cpu).join(', ')} | ${x.leaks.length} | ${x.load[0]} → ${x.load[1]} | ${((x.base.times.length / x.base.wallMs) * 1000).toFixed(2)}/s, ${s(pct(x.base.times, 50))}, ${s(pct(x.base.times, 99))}, ${x.base.machineMs} |`,
  );
process.exit(0);
