// The failover part of bench/replicas/hub.ts: SIGKILL replica 0 and time, for each of its hosts,
// the reconnect to another replica, and for each environment on them the first exec answered 200
// through a survivor; with the survivors' CPU and RSS, Postgres's CPU, and the load average over
// the same window.
import { existsSync, readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { pct, processTree, watch } from '../hub/measure.ts';
import type { Child } from '../hub/proc.ts';
import { type Placed, postExec } from '../hub/setup.ts';
import type { PoolSample, SqlSample } from './pool-probe.ts';
import type { SidecarProcs } from './sidecar-procs.ts';
import type { Drop } from './sidecars.ts';

/** How long the failover is watched before the hosts still away are reported as not back. */
export const FAILOVER_WATCH_MS = 60_000;
/**
 * Sockets this process may open for the failover's execs, for each of its two kinds of client:
 * one descriptor each, beside the load's pool, so the process stays under the open-file limit
 * whatever the environment count. More environments than that wait for a socket, and the wait
 * counts in their time (the report says when it could have).
 */
export const FAILOVER_SOCKETS = 1024;
const ATTEMPT_GAP_MS = 250;
const AT_KILL_PATIENCE_MS = 30_000;
const EXEC_BODY = JSON.stringify({ service: 'main', cmd: ['true'], timeout_sec: 5 });

export interface FailoverRun {
  replicas: { child: Child; url: string }[];
  key: string;
  placed: Placed[];
  /** The replica each environment's host was on before the kill. */
  envReplica: number[];
  /** Hosts on replica 0 before the kill. */
  victims: number;
  hosts: number;
  sidecars: SidecarProcs;
  postmaster: number;
  /** A failover client's patience per exec attempt before it sends another. */
  retryTimeoutMs: number;
  /** Per replica, the file its pool probe writes (pool-probe.ts), when --pool-probe. */
  probes?: string[];
}

const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const s = (x: number) => (x / 1000).toFixed(2);

/**
 * The kernel's count of connections a full listen queue turned away (TcpExt ListenOverflows): for
 * the whole network namespace, so other processes' sockets count too.
 */
function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const i = lines.findIndex((l) => l.startsWith('TcpExt:'));
  const names = lines[i]?.split(' ') ?? [];
  const values = lines[i + 1]?.split(' ') ?? [];
  return Number(values[names.indexOf('ListenOverflows')] ?? Number.NaN);
}

function summary(xs: number[]): string {
  const sorted = [...xs].sort((a, b) => a - b);
  const lost = sorted.filter((x) => !Number.isFinite(x)).length;
  const fin = sorted.filter(Number.isFinite);
  return `n ${sorted.length}, p50 ${s(pct(fin, 50))} s, p99 ${s(pct(fin, 99))} s, max ${s(fin.at(-1) ?? 0)} s${lost ? `, ${lost} not within ${FAILOVER_WATCH_MS / 1000} s` : ''}`;
}

/** A keep-alive client per URL, `total` sockets over all of them. */
function clients(urls: string[], total: number): Map<string, Agent> {
  const each = Math.max(1, Math.ceil(total / urls.length));
  return new Map(
    urls.map((u) => [u, new Agent({ keepAlive: true, maxSockets: each, maxFreeSockets: each })]),
  );
}

interface Attempt {
  ok: boolean;
  status: number;
  ms: number;
  text: string;
}

/** One exec on `env` through `url`, given `timeoutMs` in all (a wait for a socket included). */
async function execOnce(
  agents: Map<string, Agent>,
  url: string,
  key: string,
  env: string,
  timeoutMs: number,
): Promise<Attempt> {
  const t0 = Date.now();
  try {
    const r = await postExec({
      agent: agents.get(url)!,
      url,
      envId: env,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(EXEC_BODY),
      },
      body: EXEC_BODY,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const ok = r.status === 200 && r.text.includes('"exit_code":0');
    return { ok, status: r.status, ms: Date.now() - t0, text: ok ? '' : r.text.slice(0, 100) };
  } catch {
    return { ok: false, status: 0, ms: Date.now() - t0, text: '' };
  }
}

/**
 * The first 200 exec on `env` through the survivors in turn, ms after `killAt`: a client that
 * gives each attempt `patience` and tries again ATTEMPT_GAP_MS after a failure.
 */
async function firstExec(
  agents: Map<string, Agent>,
  urls: string[],
  key: string,
  env: string,
  killAt: number,
  patience: number,
  failed: Record<string, number>,
): Promise<number> {
  for (let i = 0; Date.now() - killAt < FAILOVER_WATCH_MS; i++) {
    const x = await execOnce(agents, urls[i % urls.length], key, env, patience);
    if (x.ok) return Date.now() - killAt;
    const k = `${x.status}${x.text ? ` ${x.text}` : ''}`;
    if (k in failed || Object.keys(failed).length < 8) failed[k] = (failed[k] ?? 0) + 1;
    await sleep(ATTEMPT_GAP_MS);
  }
  return Number.POSITIVE_INFINITY;
}

/**
 * A survivor's pool probe from `from` to `to`, one entry per second: queries waiting for a
 * connection (max), queries answered and their mean and max time, the event loop's worst delay.
 */
function timeline(file: string, from: number, to: number): string {
  if (!existsSync(file)) return '(no probe file)';
  const samples = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as PoolSample)
    .filter((x) => x.t > from && x.t <= to + 100);
  const out: string[] = [];
  for (let sec = 0; sec * 1000 < to - from + 100; sec++) {
    const xs = samples.filter((x) => Math.floor((x.t - from - 1) / 1000) === sec);
    if (!xs.length) continue;
    const done = xs.reduce((a, x) => a + x.done, 0);
    const mean = done ? xs.reduce((a, x) => a + x.msSum, 0) / done : 0;
    const max = (f: (x: PoolSample) => number) => Math.max(...xs.map(f)).toFixed(0);
    out.push(
      `${sec}-${sec + 1} s: waiting ≤ ${max((x) => x.waiting)}, ${done} queries, ${mean.toFixed(0)}/${max((x) => x.msMax)} ms, loop ≤ ${max((x) => x.loopMax)} ms`,
    );
  }
  return out.join('; ');
}

/** The statements a survivor answered from `from` to `to`, the most frequent first. */
function statements(file: string, from: number, to: number, top = 12): string {
  if (!existsSync(`${file}.sql`)) return '(no probe file)';
  const sum: Record<string, [number, number]> = {};
  for (const line of readFileSync(`${file}.sql`, 'utf8').trim().split('\n')) {
    const x = JSON.parse(line) as SqlSample;
    if (x.t <= from || x.t > to + 1000) continue;
    for (const [k, [n, ms]] of Object.entries(x.sql)) {
      const e = sum[k] ?? [0, 0];
      e[0] += n;
      e[1] += ms;
      sum[k] = e;
    }
  }
  return Object.entries(sum)
    .sort((a, b) => b[1][0] - a[1][0])
    .slice(0, top)
    .map(([k, [n, ms]]) => `${n} × ${(ms / n).toFixed(0)} ms: ${k}`)
    .join('\n      ');
}

/** Kills replica 0 and reports what followed, as lines of text. */
export async function failover(run: FailoverRun): Promise<string[]> {
  const { replicas, key, placed, envReplica, victims, sidecars } = run;
  const survivors = replicas.slice(1);
  const urls = survivors.map((r) => r.url);
  const victimEnvs = placed.flatMap((p, j) => (envReplica[j] === 0 ? [p] : []));
  const retry = clients(urls, FAILOVER_SOCKETS);
  const atKillClients = clients(urls, FAILOVER_SOCKETS);
  const before = loadavg();
  const overflowsBefore = listenOverflows();
  const w = survivors.map((r) => watch(r.child.pid));
  const wpg = watch(() => processTree(run.postmaster));
  const wsc = watch(() => sidecars.pids());
  const killAt = Date.now();
  replicas[0].child.proc.kill('SIGKILL');
  const failed: Record<string, number> = {};
  const execs = Promise.all(
    victimEnvs.map((p) => firstExec(retry, urls, key, p.envId, killAt, run.retryTimeoutMs, failed)),
  );
  // And one exec per environment sent at the kill and waited for: what a caller that does not
  // retry sees while the dead replica's hosts move.
  const atKill = Promise.all(
    victimEnvs.map((p, j) =>
      execOnce(atKillClients, urls[j % urls.length], key, p.envId, AT_KILL_PATIENCE_MS),
    ),
  );
  let d: { drops: Drop[]; open: number; errors: Record<string, number> };
  for (;;) {
    await sleep(500);
    d = await sidecars.drops(killAt, 60_000);
    const back = d.drops.filter((x) => x.up > 0).length;
    if ((d.drops.length >= victims && back === d.drops.length) || Date.now() - killAt > FAILOVER_WATCH_MS)
      break;
  }
  const allBackAt = Date.now();
  const reconnect = d.drops.map((x) => (x.up ? x.up - killAt : Number.POSITIVE_INFINITY));
  const upAt = new Map(d.drops.map((x) => [x.id, x.up ? x.up - killAt : Number.POSITIVE_INFINITY]));
  const exec = await execs;
  const sentAtKill = await atKill;
  const usage = w.map((x) => x.stop());
  const pg = wpg.stop();
  const sc = wsc.stop();
  const after = loadavg();
  const overflows = listenOverflows() - overflowsBefore;
  for (const a of [...retry.values(), ...atKillClients.values()]) a.destroy();
  // How long each environment's first exec came after its own host was back: the wait that is
  // not the reconnect's.
  const afterBack = victimEnvs.map((p, j) => exec[j] - (upAt.get(p.hostId) ?? Number.NaN));
  const statuses: Record<string, number> = {};
  for (const x of sentAtKill) {
    const k = x.ok ? 'ok' : String(x.status);
    statuses[k] = (statuses[k] ?? 0) + 1;
  }
  const queued =
    victimEnvs.length > FAILOVER_SOCKETS
      ? ` (${victimEnvs.length} clients on ${FAILOVER_SOCKETS} sockets: some waited for one)`
      : '';
  const end = Date.now();
  const probes = (run.probes ?? [])
    .slice(1)
    .flatMap((file, i) => [
      `    replica ${i + 1}'s Postgres pool per second after the kill (waiting for a connection; queries; mean/max ms from call to answer; event-loop delay): ${timeline(file, killAt, end)}`,
      `    replica ${i + 1}'s statements from the kill to the last exec (count × mean ms from call to answer):\n      ${statements(file, killAt, end)}`,
    ]);
  return [
    `  failover, ${replicas.length} replicas, ${victims} hosts and ${victimEnvs.length} environments on the killed replica (load ${before} → ${after}):`,
    `    reconnected elsewhere: ${summary(reconnect)} (${d.drops.length} drops seen; ${d.open}/${run.hosts} streams open ${s(allBackAt - killAt)} s after the kill)`,
    `    failed reconnect attempts: ${JSON.stringify(d.errors)}; listen-queue overflows meanwhile (whole network namespace): ${overflows}`,
    `    first exec 200 per environment (retried, ${run.retryTimeoutMs / 1000} s per attempt)${queued}: ${summary(exec)}`,
    `    the same, counted from its host's reconnect: ${summary(afterBack.filter((x) => !Number.isNaN(x)))}`,
    `    failed attempts before it: ${JSON.stringify(failed)}`,
    `    one exec per environment sent at the kill, answered after: ${summary(sentAtKill.map((x) => x.ms))}; ${JSON.stringify(statuses)} (0 = no answer)`,
    `    from the kill to the last exec (${s(Date.now() - killAt)} s): ${usage.map((u, i) => `replica ${i + 1} CPU ${u.cpuPct.toFixed(0)}% (runq ${u.runqPct.toFixed(0)}%), RSS max ${u.rssMax.toFixed(0)} MiB`).join('; ')}; Postgres CPU ${pg.cpuPct.toFixed(0)}%; sidecars (${sidecars.procs.length} processes) CPU ${sc.cpuPct.toFixed(0)}%`,
    ...probes,
  ];
}
