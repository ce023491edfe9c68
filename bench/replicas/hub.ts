// The hub benchmark with several replicas: R real svc-server processes on one throwaway Postgres,
// N simulated sidecars in other processes (bench/replicas/sidecars.ts, --sidecar-procs of them)
// spread over them (host i dials replica i % R first), and `POST /v1/envs/{env}/exec` sent
// open-loop at --rate from this process, spread over the replicas so that (R-1)/R of the commands
// reach a replica that does not hold the host's stream and are routed to the one that does
// (NOTIFY + the command row), as a balancer would spread them. Reported per run: rate held,
// p50/p99, CPU per exec of each replica and of Postgres, the load average before and after.
//
// --failover (R > 1): after the load, SIGKILL replica 0 and time, for each of its hosts, the
// reconnect to another replica (the sidecars reconnect as svcd does: backoff from 1 s with jitter,
// the next URL each attempt), and, for each environment on those hosts, the first exec answered
// 200 through a surviving replica (retried every 250 ms); see failover.ts. --pool-probe adds, per
// survivor and per second after the kill, its Postgres pool's queue and event-loop delay
// (pool-probe.ts), to see where the time goes.
//
//   node bench/replicas/hub.ts [--replicas 1,2,3] [--hosts 1000] [--rate 500] [--seconds 15]
//                              [--warmup 3] [--envs 200] [--repeat 1] [--failover] [--retry-timeout 2]
//                              [--sidecar-procs N] [--pool-probe]
//
// The runs are interleaved: every repeat runs each replica count once, in the order given.
// Descriptors: each process holds one socket per host it serves or simulates, so the sidecars are
// spread over ceil(hosts / 5,000) processes unless --sidecar-procs says otherwise, and this
// process's HTTP clients are bounded; the largest need is a replica's after a failover (every
// host on the survivors). Where the open-file limit cannot be raised, that need is checked against
// it before anything starts. The Postgres cluster runs as `postgres` (root needed). Everything it
// starts is stopped and every temp dir removed on exit.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createDatabase, startCluster } from '../../test/support/postgres.ts';
import { type Fire, openLoop, processTree, watch } from '../hub/measure.ts';
import {
  cleanupAll,
  freePort,
  installExitHandlers,
  nonNegative,
  onCleanup,
  postmasterPid,
  raiseFdLimit,
  startChild,
  waitHealthy,
} from '../hub/proc.ts';
import { api, createClouds, createEnvs, execFire, mintKeys, mintTokens, type Placed } from '../hub/setup.ts';
import { FAILOVER_SOCKETS, failover } from './failover.ts';
import { HOSTS_PER_PROC, startSidecars } from './sidecar-procs.ts';

const { values } = parseArgs({
  options: {
    replicas: { type: 'string', default: '1,2,3' },
    hosts: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '500' },
    seconds: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '3' },
    envs: { type: 'string', default: '200' },
    repeat: { type: 'string', default: '1' },
    failover: { type: 'boolean', default: false },
    'retry-timeout': { type: 'string', default: '2' },
    'sidecar-procs': { type: 'string' },
    'pool-probe': { type: 'boolean', default: false },
  },
});
const REPLICAS = values.replicas.split(',').map(Number);
if (REPLICAS.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error('--replicas: a comma list of counts');
const HOSTS = nonNegative('hosts', values.hosts);
const RATE = nonNegative('rate', values.rate);
const SECONDS = nonNegative('seconds', values.seconds);
const WARMUP = nonNegative('warmup', values.warmup);
const ENVS = Math.min(nonNegative('envs', values.envs), HOSTS);
const REPEAT = nonNegative('repeat', values.repeat);
const SIDECAR_PROCS = values['sidecar-procs']
  ? Math.max(1, Math.round(nonNegative('sidecar-procs', values['sidecar-procs'])))
  : Math.max(1, Math.ceil(HOSTS / HOSTS_PER_PROC));
const KEYS = Math.max(1, Math.ceil((RATE * (WARMUP + SECONDS)) / 50_000));
const HTTP_SOCKETS = 1024;
const SETUP_TIMEOUT_MS = 15 * 60_000;
/** A failover client's patience per exec attempt before it sends another. */
const RETRY_TIMEOUT_MS = nonNegative('retry-timeout', values['retry-timeout']) * 1000;
/** Descriptors a process needs beside its sockets: files, pipes, IPC, Postgres pool, slack. */
const BASE_FDS = 512;
/**
 * The most descriptors any process of the run needs: a replica after a failover holds every
 * host's stream and a share of this process's HTTP clients; a sidecar process its slice of the
 * hosts; this process its HTTP clients (the load's pool and the failover's two).
 */
const FDS_NEEDED = Math.max(
  HOSTS + HTTP_SOCKETS + 2 * FAILOVER_SOCKETS + BASE_FDS,
  Math.ceil(HOSTS / SIDECAR_PROCS) + BASE_FDS,
  HTTP_SOCKETS + 2 * FAILOVER_SOCKETS + BASE_FDS,
);

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const POOL_PROBE = new URL('./pool-probe.ts', import.meta.url).pathname;
const probeFile = (dir: string, i: number) => join(dir, `replica-${i}.pool`);

async function startReplica(dsn: string, key: string, dir: string, i: number) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = { SVC_BOOTSTRAP_KEY: key, SVC_PUBLIC_URL: url, SVC_REPLICA_URL: url };
  if (values['pool-probe']) {
    env.NODE_OPTIONS = `--import=${POOL_PROBE}`;
    env.SVC_BENCH_POOL_PROBE = probeFile(dir, i);
  }
  const child = startChild(
    'programs/svc-server.ts',
    ['-addr', `127.0.0.1:${port}`, '-db', dsn],
    env,
    join(dir, `replica-${i}.log`),
  );
  await waitHealthy(child, url);
  return { child, url };
}

const ms = (x: number) => (x / 1000).toFixed(2);

let cluster: { dsn: string; postmaster: number } | null = null;

async function runOne(replicas: number, run: number): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-replicas-'));
  const removeDir = onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  if (!cluster) {
    const c = await startCluster();
    onCleanup(() => c.stop());
    const pm = postmasterPid(Number(new URL(c.dsn).port));
    if (!pm) throw new Error('started a Postgres cluster but cannot find its postmaster');
    cluster = { dsn: c.dsn, postmaster: pm };
  }
  const pm = cluster.postmaster;
  const dsn = await createDatabase(cluster.dsn, `bench_${randomBytes(4).toString('hex')}`);
  const key = `dak_bench${randomBytes(16).toString('hex')}`;
  log(`${replicas} replica(s), ${HOSTS} hosts, run ${run}: starting (logs in ${dir})`);
  // The first one migrates and creates the team; the others start on a ready database.
  const reps = [await startReplica(dsn, key, dir, 0)];
  reps.push(
    ...(await Promise.all(
      Array.from({ length: replicas - 1 }, (_, i) => startReplica(dsn, key, dir, i + 1)),
    )),
  );
  const urls = reps.map((r) => r.url);
  const a0 = api(urls[0], key);
  const tokens = await mintTokens(a0, HOSTS, await createClouds(a0, ENVS));
  const sc = await startSidecars(HOSTS, SIDECAR_PROCS, dir);
  const joined = await sc.join(urls, tokens, 200, SETUP_TIMEOUT_MS);
  log(
    `joined ${joined.ok}/${HOSTS} in ${ms(joined.ms)} s (${sc.procs.length} sidecar processes: ${sc.sizes.join(', ')})`,
  );
  if (joined.failed) log(`join failures: ${JSON.stringify(joined.errors)}`);
  const placed: Placed[] = await createEnvs(a0, ENVS);
  const where = await sc.where(SETUP_TIMEOUT_MS);
  const hostReplica = new Map(where.ids.map((id, i) => [id, where.replica[i]]));
  const envReplica = placed.map((p) => hostReplica.get(p.hostId) ?? -1);

  const keys = await mintKeys(a0, KEYS);
  const fires = urls.map((u) => execFire(api(u, key), placed, Math.ceil(HTTP_SOCKETS / replicas), keys));
  let routed = 0;
  // Exec i goes to env e = i % E through replica (e + ⌊i/E⌋) % R: each pass over the envs shifts
  // every env to the next replica, so each env goes through every replica in turn, and each pass
  // still spreads over all replicas.
  const fire: Fire = (i) => {
    const r = ((i % placed.length) + Math.floor(i / placed.length)) % replicas;
    if (envReplica[i % placed.length] !== r) routed++;
    return fires[r].fire(i);
  };
  log(`${ENVS} environments; HTTP exec at ${RATE}/s`);
  if (WARMUP > 0) await openLoop(RATE, WARMUP, fire);
  routed = 0;
  const loadBefore = loadavg();
  const w = reps.map((r) => watch(r.child.pid));
  const wpg = watch(() => processTree(pm));
  const wsc = watch(() => sc.pids());
  const f = await openLoop(RATE, SECONDS, fire);
  const usage = w.map((x) => x.stop());
  const pg = wpg.stop();
  const scu = wsc.stop();
  const loadAfter = loadavg();
  for (const x of fires) x.close();
  const perExec = (cpuPct: number) => (cpuPct * 10_000) / Math.max(1, f.achievedRate);
  const total = usage.reduce((s, u) => s + u.cpuPct, 0);
  const out = [
    `| ${replicas} | ${run} | ${HOSTS} | ${RATE} | ${f.achievedRate.toFixed(0)} | ${f.ok}/${f.sent} | ` +
      `${f.p50.toFixed(1)} | ${f.p99.toFixed(1)} | ${((routed * 100) / Math.max(1, f.sent)).toFixed(0)}% | ` +
      `${usage.map((u) => `${u.cpuPct.toFixed(0)}% / ${perExec(u.cpuPct).toFixed(0)} (runq ${u.runqPct.toFixed(0)}%, RSS ${u.rssMax.toFixed(0)} MiB)`).join(', ')} | ` +
      `${perExec(total).toFixed(0)} | ${pg.cpuPct.toFixed(0)}% / ${perExec(pg.cpuPct).toFixed(0)} | ` +
      `${scu.cpuPct.toFixed(0)}% | ${loadBefore} → ${loadAfter} |`,
  ];
  if (f.errors) out.push(`  errors: ${JSON.stringify(f.errorKinds)}`);

  if (values.failover && replicas > 1) {
    await sleep(2000); // the load's tail answered, the streams quiet
    const victims = where.replica.filter((r) => r === 0).length;
    log(`SIGKILL replica 0 (${victims} hosts)`);
    out.push(
      ...(await failover({
        replicas: reps,
        key,
        placed,
        envReplica,
        victims,
        hosts: HOSTS,
        sidecars: sc,
        postmaster: pm,
        retryTimeoutMs: RETRY_TIMEOUT_MS,
        probes: values['pool-probe'] ? reps.map((_, i) => probeFile(dir, i)) : undefined,
      })),
    );
  }
  await sc.stop();
  for (const r of reps) await r.child.stop();
  await removeDir();
  return out;
}

installExitHandlers();
raiseFdLimit(Math.max(65_536, 4 * HOSTS), FDS_NEEDED);
const lines: string[] = [];
try {
  for (let run = 1; run <= REPEAT; run++) {
    for (const r of REPLICAS) {
      const out = await runOne(r, run);
      process.stdout.write(`${out.join('\n')}\n`);
      lines.push(...out);
    }
  }
  process.stdout.write(
    '\n| replicas | run | hosts | rate asked | held /s | ok/sent | p50 ms | p99 ms | routed | each replica CPU% / µs per exec | replicas µs/exec | Postgres CPU% / µs/exec | sidecars CPU% | load avg before → after |\n' +
      `|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n${lines.join('\n')}\n`,
  );
} finally {
  await cleanupAll();
}
