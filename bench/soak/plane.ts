// The system under soak: one `svc-server --dev` (the real program) on a fresh SQLite file or a
// fresh database in a throwaway Postgres cluster, with its local svcd on this machine's Docker.
// Both processes are watched: an exit is recorded with the log's last lines (svcd's output goes
// to the control plane's log, --dev inherits it) and the control plane is started again on the
// same database and identity so the soak goes on and can find more than the first failure.
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { createDatabase, startCluster } from '../../test/support/postgres.ts';
import { rssMiB } from '../hub/measure.ts';
import { type Child, freePort, onCleanup, startChild, tail, waitHealthy } from '../hub/proc.ts';
import { sleep } from './http.ts';

export type Dialect = 'sqlite' | 'postgres';

export interface Exit {
  proc: 'svc-server' | 'svcd';
  pid: number;
  /** Minutes into the soak. */
  atMin: number;
  how: string;
  lastLog: string;
}

export interface Sample {
  atMin: number;
  server: { pid: number; rssMiB: number; fds: number } | null;
  svcd: { pid: number; rssMiB: number; fds: number } | null;
}

export interface Plane {
  url: string;
  key: string;
  /** The database's target (file or DSN), for the end-of-run checks. */
  db: string;
  devDir: string;
  log: string;
  exits: Exit[];
  samples: Sample[];
  /** Whether the control plane answers /health now (false while it is being restarted). */
  up(): boolean;
  /** Stops sampling and restarting; SIGTERM to the control plane (svcd ends with it). */
  stop(): Promise<void>;
  /** Unmounts the local sidecar's XFS image (after stop). */
  closeStore(): Promise<void>;
}

const LOG_LINES = 30;

export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

export function openFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return 0;
  }
}

/** The local sidecar: the child of `parent` whose command line runs svcd. */
export function svcdOf(parent: number): number | null {
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== parent) continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('svcd.ts')) return Number(name);
    } catch {
      // Gone meanwhile.
    }
  }
  return null;
}

async function database(
  dialect: Dialect,
  dir: string,
): Promise<{ target: string; env: Record<string, string> }> {
  if (dialect === 'sqlite') return { target: join(dir, 'svc.db'), env: {} };
  const cluster = await startCluster();
  onCleanup(() => cluster.stop());
  const target = await createDatabase(cluster.dsn, `soak_${randomBytes(4).toString('hex')}`);
  // A Postgres control plane seals provider tokens only with SVC_SECRETS_KEY (no key file).
  return { target, env: { SVC_SECRETS_KEY: randomBytes(32).toString('base64') } };
}

export async function startPlane(o: {
  dialect: Dialect;
  dir: string;
  /** The control plane's (and svcd's) output, appended. */
  log: string;
  env: Record<string, string>;
  sampleMs: number;
  t0: number;
  say: (line: string) => void;
}): Promise<Plane> {
  const { target, env: dbEnv } = await database(o.dialect, o.dir);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const key = `dak_soak${randomBytes(16).toString('hex')}`;
  const devDir = join(o.dir, '.svc');
  const log = o.log;
  const env = {
    SVC_BOOTSTRAP_KEY: key,
    SVC_DEV_DIR: devDir,
    SVC_DEV_LOGIN: '1',
    // --dev's E2B-compatible listener on a port of its own, not the fixed 3049 another run may hold.
    SVC_E2B_ADDR: '127.0.0.1:0',
    ...dbEnv,
    ...o.env,
  };
  const args = ['--dev', '-addr', `127.0.0.1:${port}`, '-db', target, '-public-url', url];
  const atMin = () => (Date.now() - o.t0) / 60_000;
  let child: Child;
  let svcd: number | null = null;
  let stopping = false;
  let healthy = false;
  const exits: Exit[] = [];
  const samples: Sample[] = [];

  const launch = async () => {
    child = startChild('programs/svc-server.ts', args, env, log);
    const c = child;
    c.proc.once('exit', (code, signal) => {
      healthy = false;
      if (stopping) return;
      exits.push({
        proc: 'svc-server',
        pid: c.pid,
        atMin: atMin(),
        how: `${signal ?? code}`,
        lastLog: tail(log, LOG_LINES),
      });
      o.say(
        `svc-server (pid ${c.pid}) EXITED (${signal ?? code}); restarting it. Last lines:\n${tail(log, 12)}`,
      );
      void relaunch();
    });
    await waitHealthy(c, url, 120_000);
    for (let i = 0; i < 600 && !svcd; i++) {
      svcd = svcdOf(c.pid);
      if (!svcd) await sleep(100);
    }
    // Work starts once the local host is connected (a deploy before that has nowhere to go).
    for (let i = 0; i < 1200; i++) {
      const r = await fetch(`${url}/v1/hosts`, { headers: { authorization: `Bearer ${key}` } }).catch(
        () => null,
      );
      const hosts = r?.ok ? ((await r.json()) as { hosts: { connected: boolean }[] }).hosts : [];
      if (hosts.some((h) => h.connected)) break;
      if (c.proc.exitCode !== null) throw new Error(`control plane exited:\n${tail(log, LOG_LINES)}`);
      await sleep(100);
    }
    healthy = true;
  };
  const relaunch = async () => {
    for (let attempt = 1; !stopping; attempt++) {
      try {
        const old = svcd;
        svcd = null;
        await launch();
        // --dev's sidecar watches its parent and ends with it; one still running is an orphan.
        if (old) {
          const orphan = alive(old) && old !== svcd;
          exits.push({
            proc: 'svcd',
            pid: old,
            atMin: atMin(),
            how: orphan ? 'outlived its control plane (still running)' : 'exited with its control plane',
            lastLog: '',
          });
          if (orphan) {
            o.say(`svcd (pid ${old}) outlived its control plane`);
            onCleanup(() => void process.kill(old, 'SIGKILL'));
          }
        }
        return;
      } catch (err) {
        o.say(`restart ${attempt} failed: ${(err as Error).message.slice(0, 500)}`);
        if (attempt >= 5) return;
        await sleep(5000);
      }
    }
  };
  await launch();
  if (!svcd) throw new Error(`--dev started no local sidecar:\n${tail(log, LOG_LINES)}`);

  const sampler = setInterval(() => {
    const s: Sample = { atMin: atMin(), server: null, svcd: null };
    if (child && alive(child.pid))
      s.server = { pid: child.pid, rssMiB: rssMiB(child.pid), fds: openFds(child.pid) };
    if (svcd && alive(svcd)) s.svcd = { pid: svcd, rssMiB: rssMiB(svcd), fds: openFds(svcd) };
    else if (svcd && !stopping && healthy) {
      // Died on its own (a control plane exit is recorded by the restart, svcd's with it).
      exits.push({ proc: 'svcd', pid: svcd, atMin: atMin(), how: 'exited', lastLog: tail(log, LOG_LINES) });
      o.say(`svcd (pid ${svcd}) exited; last lines in ${log}`);
      svcd = null;
    } else if (!svcd && child && alive(child.pid)) svcd = svcdOf(child.pid);
    samples.push(s);
  }, o.sampleMs);

  return {
    url,
    key,
    db: target,
    devDir,
    log,
    exits,
    samples,
    up: () => healthy,
    async stop() {
      stopping = true;
      clearInterval(sampler);
      await child.stop();
    },
    async closeStore() {
      if (existsSync(join(devDir, 'data'))) await closeXfsLoop(join(devDir, 'data'));
    },
  };
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than 2 points. */
export function slope(points: [number, number][]): number {
  const n = points.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (const [x, y] of points) {
    sx += x;
    sy += y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

export interface Trend {
  pid: number | null;
  samples: number;
  rssStartMiB: number;
  rssEndMiB: number;
  rssMaxMiB: number;
  rssMiBPerMin: number;
  fdsStart: number;
  fdsEnd: number;
  fdsPerMin: number;
}

/**
 * The slope between warm-up and the end of the load (`untilMin`) of the last lifetime of one
 * process (samples of its latest pid in that window).
 */
export function trend(
  samples: Sample[],
  which: 'server' | 'svcd',
  warmupMin: number,
  untilMin: number,
): Trend {
  const all = samples.filter((s) => s[which] && s.atMin <= untilMin);
  const last = all.at(-1)?.[which]?.pid ?? null;
  const mine = all.filter((s) => s[which]?.pid === last);
  const after = mine.filter((s) => s.atMin >= warmupMin);
  const use = after.length >= 2 ? after : mine;
  const rss = use.map((s): [number, number] => [s.atMin, s[which]!.rssMiB]);
  const fds = use.map((s): [number, number] => [s.atMin, s[which]!.fds]);
  const round = (v: number, d = 2) => Math.round(v * 10 ** d) / 10 ** d;
  return {
    pid: last,
    samples: use.length,
    rssStartMiB: round(rss[0]?.[1] ?? 0, 1),
    rssEndMiB: round(rss.at(-1)?.[1] ?? 0, 1),
    rssMaxMiB: round(Math.max(0, ...mine.map((s) => s[which]!.rssMiB)), 1),
    rssMiBPerMin: round(slope(rss), 3),
    fdsStart: fds[0]?.[1] ?? 0,
    fdsEnd: fds.at(-1)?.[1] ?? 0,
    fdsPerMin: round(slope(fds), 3),
  };
}
