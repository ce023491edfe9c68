// The hub benchmark with several replicas: R real svc-server processes on one throwaway Postgres,
// N simulated sidecars in another process (bench/replicas/sidecars.ts) spread over them (host i
// dials replica i % R first), and `POST /v1/envs/{env}/exec` sent open-loop at --rate from this
// process, spread over the replicas so that (R-1)/R of the commands reach a replica that does not
// hold the host's stream and are routed to the one that does (NOTIFY + the command row), as a
// balancer would spread them. Reported per run: rate held, p50/p99, CPU per exec of each replica
// and of Postgres, the load average before and after.
//
// --failover (R > 1): after the load, SIGKILL replica 0 and time, for each of its hosts, the
// reconnect to another replica (the sidecars reconnect as svcd does: backoff from 1 s with jitter,
// the next URL each attempt), and, for each environment on those hosts, the first exec answered
// 200 through a surviving replica (retried every 250 ms).
//
//   node bench/replicas/hub.ts [--replicas 1,2,3] [--hosts 1000] [--rate 500] [--seconds 15]
//                              [--warmup 3] [--envs 200] [--repeat 1] [--failover] [--retry-timeout 2]
//
// The runs are interleaved: every repeat runs each replica count once, in the order given.
// Needs root (open-file limit; the Postgres cluster runs as `postgres`). Everything it starts is
// stopped and every temp dir removed on exit.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createDatabase, startCluster } from '../../test/support/postgres.ts';
import { type Fire, openLoop, pct, processTree, watch } from '../hub/measure.ts';
import {
  type Child,
  cleanupAll,
  freePort,
  installExitHandlers,
  nextMessage,
  nonNegative,
  onCleanup,
  postmasterPid,
  raiseFdLimit,
  startChild,
  waitHealthy,
} from '../hub/proc.ts';
import { api, createClouds, createEnvs, execFire, mintKeys, mintTokens, type Placed } from '../hub/setup.ts';
import type { Drops, FromSidecars, Joined, ToSidecars, Where } from './sidecars.ts';

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
const KEYS = Math.max(1, Math.ceil((RATE * (WARMUP + SECONDS)) / 50_000));
const HTTP_SOCKETS = 1024;
const SETUP_TIMEOUT_MS = 15 * 60_000;
/** How long the failover is watched before the hosts still away are reported as not back. */
const FAILOVER_WATCH_MS = 60_000;
/** A failover client's patience per exec attempt before it sends another. */
const RETRY_TIMEOUT_MS = nonNegative('retry-timeout', values['retry-timeout']) * 1000;

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function ask<T extends FromSidecars>(sc: Child, m: ToSidecars, op: T['op']): Promise<T> {
  const answer = nextMessage<T>(sc, (x) => x?.op === op, SETUP_TIMEOUT_MS);
  sc.proc.send(m);
  return answer;
}

async function startReplica(dsn: string, key: string, dir: string, i: number) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { SVC_BOOTSTRAP_KEY: key, SVC_PUBLIC_URL: url, SVC_REPLICA_URL: url };
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

/** One exec on `env` through `url` with a client timeout: its status (0: no answer) and time. */
async function execOnce(url: string, key: string, env: string, timeoutMs: number) {
  const t0 = Date.now();
  try {
    const r = await fetch(`${url}/v1/envs/${env}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ service: 'main', cmd: ['true'], timeout_sec: 5 }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await r.text();
    const ok = r.status === 200 && text.includes('"exit_code":0');
    return { ok, status: r.status, ms: Date.now() - t0, text: ok ? '' : text.slice(0, 100) };
  } catch {
    return { ok: false, status: 0, ms: Date.now() - t0, text: '' };
  }
}

/**
 * The first 200 exec on `env` through the surviving replicas in turn, ms after `killAt`: a client
 * that gives each attempt RETRY_TIMEOUT_MS and tries again 250 ms after a failure.
 */
async function firstExec(
  urls: string[],
  key: string,
  env: string,
  killAt: number,
  failed: Record<string, number>,
): Promise<number> {
  for (let i = 0; Date.now() - killAt < FAILOVER_WATCH_MS; i++) {
    const x = await execOnce(urls[i % urls.length], key, env, RETRY_TIMEOUT_MS);
    if (x.ok) return Date.now() - killAt;
    const k = `${x.status}${x.text ? ` ${x.text}` : ''}`;
    if (k in failed || Object.keys(failed).length < 8) failed[k] = (failed[k] ?? 0) + 1;
    await sleep(250);
  }
  return Number.POSITIVE_INFINITY;
}

function summary(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const lost = s.filter((x) => !Number.isFinite(x)).length;
  const fin = s.filter(Number.isFinite);
  return `n ${s.length}, p50 ${ms(pct(fin, 50))} s, p99 ${ms(pct(fin, 99))} s, max ${ms(fin.at(-1) ?? 0)} s${lost ? `, ${lost} not within ${FAILOVER_WATCH_MS / 1000} s` : ''}`;
}

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
  const sc = startChild('bench/replicas/sidecars.ts', [], {}, join(dir, 'sidecars.log'));
  await nextMessage(sc, (m) => m?.op === 'ready', 30_000);
  const joined = await ask<Joined>(sc, { op: 'join', urls, tokens, concurrency: 200 }, 'joined');
  log(`joined ${joined.ok}/${HOSTS} in ${ms(joined.ms)} s`);
  if (joined.failed) log(`join failures: ${JSON.stringify(joined.errors)}`);
  const placed: Placed[] = await createEnvs(a0, ENVS);
  const where = await ask<Where>(sc, { op: 'where' }, 'where');
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
  const wsc = watch(sc.pid);
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
      `${usage.map((u) => `${u.cpuPct.toFixed(0)}% / ${perExec(u.cpuPct).toFixed(0)} (runq ${u.runqPct.toFixed(0)}%)`).join(', ')} | ` +
      `${perExec(total).toFixed(0)} | ${pg.cpuPct.toFixed(0)}% / ${perExec(pg.cpuPct).toFixed(0)} | ` +
      `${scu.cpuPct.toFixed(0)}% | ${loadBefore} → ${loadAfter} |`,
  ];
  if (f.errors) out.push(`  errors: ${JSON.stringify(f.errorKinds)}`);

  if (values.failover && replicas > 1) {
    await sleep(2000); // the load's tail answered, the streams quiet
    const victims = where.replica.filter((r) => r === 0).length;
    const victimEnvs = placed.filter((_, j) => envReplica[j] === 0);
    const before = loadavg();
    const killAt = Date.now();
    reps[0].child.proc.kill('SIGKILL');
    log(`SIGKILL replica 0 (${victims} hosts, ${victimEnvs.length} environments)`);
    const failed: Record<string, number> = {};
    const execs = Promise.all(victimEnvs.map((p) => firstExec(urls.slice(1), key, p.envId, killAt, failed)));
    // And one exec per environment sent at the kill and waited for (up to 30 s): what a caller
    // that does not retry sees while the dead replica still holds its hosts' locations.
    const atKill = Promise.all(
      victimEnvs.map((p, j) => execOnce(urls[1 + (j % (replicas - 1))], key, p.envId, 30_000)),
    );
    let d: Drops;
    for (;;) {
      await sleep(500);
      d = await ask<Drops>(sc, { op: 'drops', since: killAt }, 'drops');
      const back = d.drops.filter((x) => x.up > 0).length;
      if ((d.drops.length >= victims && back === d.drops.length) || Date.now() - killAt > FAILOVER_WATCH_MS)
        break;
    }
    const reconnect = d.drops.map((x) => (x.up ? x.up - killAt : Number.POSITIVE_INFINITY));
    const exec = await execs;
    const sentAtKill = await atKill;
    const statuses: Record<string, number> = {};
    for (const x of sentAtKill)
      statuses[x.ok ? 'ok' : String(x.status)] = (statuses[x.ok ? 'ok' : String(x.status)] ?? 0) + 1;
    out.push(
      `  failover, ${replicas} replicas, ${victims} hosts on the killed replica (load ${before} → ${loadavg()}):`,
      `    reconnected elsewhere: ${summary(reconnect)} (${d.drops.length} drops seen; ${d.open}/${HOSTS} streams open)`,
      `    failed reconnect attempts: ${JSON.stringify(d.errors)}`,
      `    first exec 200 per environment on them (retried, ${RETRY_TIMEOUT_MS / 1000} s per attempt): ${summary(exec)}`,
      `    failed attempts before it: ${JSON.stringify(failed)}`,
      `    one exec per environment sent at the kill, answered after: ${summary(sentAtKill.map((x) => x.ms))}; ${JSON.stringify(statuses)} (0 = no answer)`,
    );
  }
  await sc.stop();
  for (const r of reps) await r.child.stop();
  await removeDir();
  return out;
}

installExitHandlers();
raiseFdLimit(Math.max(65_536, 4 * HOSTS), HOSTS * 2 + HTTP_SOCKETS + 512);
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
