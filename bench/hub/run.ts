// Hub benchmark: N simulated sidecars (a separate process, bench/hub/sidecars.ts) join the real
// control plane and heartbeat; we report its RSS and CPU idle and under a fixed command rate, and
// the command round trip two ways:
//   HTTP exec     POST /v1/envs/{env}/exec from this process, sent open-loop at --rate, against
//                 the svc-server program (HTTP + auth + DB + stream + sidecar and back);
//   hub dispatch  the same control plane restarted as bench/hub/hub-server.ts (startServer plus an
//                 IPC hook) calling dispatcher.run directly at --rate (DB + stream + sidecar).
// The restart also measures how fast all N hosts reconnect with their saved secrets.
//
//   node bench/hub/run.ts [--hosts 1000,10000] [--rate 2000] [--seconds 20] [--db sqlite,postgres]
//                         [--envs 200] [--idle 15] [--warmup 3] [--repeat 1] [--profile DIR]
//                         [--node-flags '--perf-basic-prof'] [--pin]
//
// --pin gives the control plane CPU 0 to itself and puts this process and the sidecars on the
// other CPUs: its CPU% is then of one core, and the rate it holds is what one core does (the
// issue-15 baseline was stated that way: "2,300/s on one core"). Without it everything shares.
//
// --profile writes a V8 CPU profile of each control plane start into DIR (read it with
// `node bench/hub/profile-top.ts FILE`, or Chrome DevTools). It samples wall time on the main
// thread, so a blocking syscall (an fsync) looks like CPU there; `perf record -p <svc-server pid>`
// with `--node-flags --perf-basic-prof` counts CPU only, JavaScript frames named.
//
// Needs root for the open-file limit (or a hard limit above 2 × hosts) and Postgres server
// binaries for --db postgres. Everything it starts is stopped and every temp dir removed on exit.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createDatabase, startCluster } from '../../test/support/postgres.ts';
import type { FromHubServer, HubLoad } from './hub-server.ts';
import { type LoadFigures, openLoop, processTree, rssMiB, type Usage, watch } from './measure.ts';
import { type Probe, startProbe, stopProbe, type ToProbe } from './probe.ts';
import {
  type Child,
  cleanupAll,
  freePort,
  installExitHandlers,
  nextMessage,
  nonNegative,
  onCleanup,
  pinning,
  postmasterPid,
  raiseFdLimit,
  startChild,
  waitHealthy,
} from './proc.ts';
import { formatGoals, formatRun, LEGEND, type LoadResult, type RunResult } from './report.ts';
import {
  api,
  createClouds,
  createEnvs,
  execFire,
  mintKeys,
  mintTokens,
  type Placed,
  teamId,
} from './setup.ts';
import type { ConnectReport, FromSidecars, SidecarStats, ToSidecars } from './sidecars.ts';

const { values } = parseArgs({
  options: {
    hosts: { type: 'string', default: '1000,10000' },
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '20' },
    db: { type: 'string', default: 'sqlite,postgres' },
    envs: { type: 'string', default: '200' },
    idle: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '3' },
    repeat: { type: 'string', default: '1' },
    profile: { type: 'string' },
    'node-flags': { type: 'string', default: '' },
    pin: { type: 'boolean', default: false },
  },
});
const HOSTS = values.hosts.split(',').map(Number);
const RATE = nonNegative('rate', values.rate);
const SECONDS = nonNegative('seconds', values.seconds);
const DBS = values.db.split(',');
const ENVS = nonNegative('envs', values.envs);
const IDLE_SECONDS = nonNegative('idle', values.idle);
const WARMUP_SECONDS = nonNegative('warmup', values.warmup);
const REPEAT = nonNegative('repeat', values.repeat);
/** A directory for V8 CPU profiles of the control plane (one per server start), when given. */
const PROFILE_DIR = values.profile ? resolve(values.profile) : null;
if (HOSTS.some((n) => !Number.isInteger(n) || n < 1)) throw new Error('--hosts: a comma list of counts');
if (DBS.some((d) => d !== 'sqlite' && d !== 'postgres')) throw new Error('--db: sqlite, postgres or both');

/** Requests one credential may send in its 60 s window (DEFAULT_LIMITS), with a margin. */
const PER_KEY_REQUESTS = 50_000;
/** Enough keys that warm-up plus the window stay under each one's limit; one at the default rate. */
const KEYS = Math.max(1, Math.ceil((RATE * (WARMUP_SECONDS + SECONDS)) / PER_KEY_REQUESTS));
const PIN = values.pin ? pinning(availableParallelism()) : null;

const CONNECT_CONCURRENCY = 200;
const PROBE = new URL('./probe.ts', import.meta.url).pathname;
/** HTTP sockets: enough that a stall of a second at the full rate does not queue in the client. */
const HTTP_SOCKETS = 1024;
const SETUP_TIMEOUT_MS = 15 * 60_000;

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function log(line: string): void {
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

interface Db {
  name: string;
  target: string;
  /** The processes whose CPU counts as the database's, or null for SQLite (inside the server). */
  pids: (() => number[]) | null;
}

let cluster: { dsn: string; postmaster: number } | null = null;

async function freshDb(kind: string, dir: string): Promise<Db> {
  if (kind === 'sqlite') return { name: 'sqlite', target: join(dir, 'svc.db'), pids: null };
  if (!cluster) {
    const c = await startCluster();
    onCleanup(() => c.stop());
    const pm = postmasterPid(Number(new URL(c.dsn).port));
    if (!pm) throw new Error('started a Postgres cluster but cannot find its postmaster');
    cluster = { dsn: c.dsn, postmaster: pm };
  }
  const pm = cluster.postmaster;
  const target = await createDatabase(cluster.dsn, `bench_${randomBytes(4).toString('hex')}`);
  return { name: 'postgres', target, pids: () => processTree(pm) };
}

function askSidecars<T extends FromSidecars>(sc: Child, m: ToSidecars, op: T['op']): Promise<T> {
  const answer = nextMessage<T>(sc, (x) => x?.op === op, SETUP_TIMEOUT_MS);
  sc.proc.send(m);
  return answer;
}

interface Window {
  server: Usage;
  sc: Usage;
  pg: Usage | null;
  probe: Probe;
  scProbe: Probe;
}

/** A child's stalls over the window: it was started with the probe preloaded. */
function childProbe(child: Child): () => Promise<Probe> {
  child.proc.send({ op: 'probe-start' } satisfies ToProbe);
  return () => {
    const probe = nextMessage<Probe>(child, (m) => m?.op === 'probe', 30_000);
    child.proc.send({ op: 'probe-stop' } satisfies ToProbe);
    return probe;
  };
}

/** CPU and RSS of the control plane, sidecars and database, and their stalls, over one window. */
function watchAll(server: Child, sc: Child, db: Db): () => Promise<Window> {
  const probes = { server: childProbe(server), sc: childProbe(sc) };
  const w = { server: watch(server.pid), sc: watch(sc.pid), pg: db.pids ? watch(db.pids) : null };
  return async () => {
    const usage = { server: w.server.stop(), sc: w.sc.stop(), pg: w.pg?.stop() ?? null };
    return { ...usage, probe: await probes.server(), scProbe: await probes.sc() };
  };
}

function loadResult(figures: LoadFigures, u: Window, gen: Usage | null, genProbe: Probe | null): LoadResult {
  return {
    figures,
    probe: u.probe,
    sidecarsProbe: u.scProbe,
    generatorProbe: genProbe,
    server: u.server,
    sidecarsCpuPct: u.sc.cpuPct,
    pgCpuPct: u.pg?.cpuPct ?? null,
    generatorCpuPct: gen?.cpuPct ?? null,
    generatorRunqPct: gen?.runqPct ?? null,
  };
}

async function startControlPlane(script: string, db: Db, dir: string, key: string, tag: string) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = { SVC_BOOTSTRAP_KEY: key, SVC_PUBLIC_URL: url };
  env.NODE_OPTIONS = `--import=${PROBE} ${values['node-flags']}`.trim();
  if (PROFILE_DIR) {
    const name = `${db.name}-${tag}-${Date.now()}.cpuprofile`;
    env.NODE_OPTIONS += ` --cpu-prof --cpu-prof-dir=${PROFILE_DIR} --cpu-prof-name=${name}`;
  }
  const child = startChild(
    script,
    ['-addr', `127.0.0.1:${port}`, '-db', db.target],
    env,
    join(dir, `${tag}.log`),
    PIN?.controlPlane,
  );
  await waitHealthy(child, url);
  return { child, url };
}

async function runOne(dbKind: string, hosts: number, run: number): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-hub-'));
  const removeDir = onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const db = await freshDb(dbKind, dir);
  const key = `dak_bench${randomBytes(16).toString('hex')}`;
  const envs = Math.min(ENVS, hosts);
  log(`${dbKind}, ${hosts} hosts, run ${run}: starting svc-server (logs in ${dir})`);
  const cp = await startControlPlane('programs/svc-server.ts', db, dir, key, 'svc-server');
  const baselineRss = rssMiB(cp.child.pid);
  const a = api(cp.url, key);
  const team = await teamId(a);

  let t0 = performance.now();
  const clouds = await createClouds(a, envs);
  const tokens = await mintTokens(a, hosts, clouds);
  const mintMs = performance.now() - t0;
  log(`minted ${hosts} tokens in ${(mintMs / 1000).toFixed(1)} s; starting the sidecars`);

  const sc = startChild(
    'bench/hub/sidecars.ts',
    [],
    { NODE_OPTIONS: `--import=${PROBE}` },
    join(dir, 'sidecars.log'),
    PIN?.rest,
  );
  await nextMessage(sc, (m) => m?.op === 'ready', 30_000);
  const hostIds = nextMessage<{ ids: string[] }>(sc, (m) => m?.op === 'hosts', SETUP_TIMEOUT_MS);
  const joined = await askSidecars<ConnectReport>(
    sc,
    { op: 'join', url: cp.url, tokens, concurrency: CONNECT_CONCURRENCY },
    'connected',
  );
  await hostIds;
  log(`joined ${joined.ok}/${hosts} in ${(joined.ms / 1000).toFixed(1)} s; idle ${IDLE_SECONDS} s`);
  if (joined.ok < hosts) log(`join failures: ${JSON.stringify(joined.errors)}`);

  let stopWatch = watchAll(cp.child, sc, db);
  await sleep(IDLE_SECONDS * 1000);
  const idleU = await stopWatch();

  t0 = performance.now();
  const placed: Placed[] = await createEnvs(a, envs);
  const envsMs = performance.now() - t0;
  log(`created ${envs} environments in ${(envsMs / 1000).toFixed(1)} s; HTTP exec load`);

  const http = execFire(a, placed, HTTP_SOCKETS, await mintKeys(a, KEYS));
  if (WARMUP_SECONDS > 0) await openLoop(RATE, WARMUP_SECONDS, http.fire);
  stopWatch = watchAll(cp.child, sc, db);
  const gen = watch(process.pid);
  startProbe();
  const httpFigures = await openLoop(RATE, SECONDS, http.fire);
  const genProbe = stopProbe();
  const genUsage = gen.stop();
  const httpResult = loadResult(httpFigures, await stopWatch(), genUsage, genProbe);
  http.close();
  log(`HTTP exec: p99 ${httpFigures.p99.toFixed(1)} ms; restarting as the dispatcher harness`);

  await cp.child.stop();
  const hs = await startControlPlane('bench/hub/hub-server.ts', db, dir, key, 'hub-server');
  const re = await askSidecars<ConnectReport>(
    sc,
    { op: 'reconnect', url: hs.url, concurrency: CONNECT_CONCURRENCY },
    'connected',
  );
  log(`reconnected ${re.ok}/${hosts} in ${(re.ms / 1000).toFixed(1)} s; hub dispatch load`);
  const measuring = nextMessage(hs.child, (m) => m?.op === 'measuring', SETUP_TIMEOUT_MS);
  const loaded = nextMessage<Extract<FromHubServer, { op: 'loaded' }>>(
    hs.child,
    (m) => m?.op === 'loaded',
    SETUP_TIMEOUT_MS,
  );
  hs.child.proc.send({
    op: 'load',
    rate: RATE,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    teamId: team,
    targets: placed,
  } satisfies HubLoad);
  await measuring;
  stopWatch = watchAll(hs.child, sc, db);
  const hubFigures = (await loaded).figures;
  const hubResult = loadResult(hubFigures, await stopWatch(), null, null);
  const st = await askSidecars<SidecarStats>(sc, { op: 'stats' }, 'stats');

  await hs.child.stop();
  await sc.stop();
  await removeDir();
  return {
    db: dbKind,
    hosts,
    run,
    rate: RATE,
    envs,
    baselineRss,
    mintMs,
    join: { ms: joined.ms, p50: joined.p50, p99: joined.p99, failed: joined.failed, errors: joined.errors },
    idle: {
      server: idleU.server,
      sidecarsCpuPct: idleU.sc.cpuPct,
      pgCpuPct: idleU.pg?.cpuPct ?? null,
      probe: idleU.probe,
    },
    envsMs,
    http: httpResult,
    reconnect: { ms: re.ms, p99: re.p99, failed: re.failed },
    hub: hubResult,
    drops: st.drops,
  };
}

installExitHandlers();
raiseFdLimit(Math.max(65_536, 4 * Math.max(...HOSTS)), Math.max(...HOSTS) + HTTP_SOCKETS + 512);
const results: RunResult[] = [];
try {
  for (const dbKind of DBS) {
    for (const hosts of HOSTS) {
      for (let run = 1; run <= REPEAT; run++) {
        const r = await runOne(dbKind, hosts, run);
        results.push(r);
        process.stdout.write(`\n${formatRun(r)}\n`);
        if (PIN)
          process.stdout.write(
            `pinned: control plane on CPU ${PIN.controlPlane}, load generator and sidecars on CPUs ${PIN.rest}\n`,
          );
        if (KEYS > 1)
          process.stdout.write(`HTTP exec spread over ${KEYS} API keys (60,000 requests a minute each)\n`);
      }
    }
  }
  process.stdout.write(`\n${LEGEND}\n\n${formatGoals(results, RATE)}\n`);
} finally {
  await cleanupAll();
}
