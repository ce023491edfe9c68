// Database checkpoints before a snapshot, so the files captured while the stack is paused are
// consistent on their own: Postgres CHECKPOINT (everything committed is in the data files),
// Redis BGSAVE (a fresh dump.rdb), MySQL/MariaDB FLUSH TABLES. A database is recognised by the
// processes its container runs (read from /proc: the sidecar shares the engine's pid namespace),
// falling back to the image name when /proc says nothing. Under gVisor the host's /proc shows only
// the sandbox, so gVisor's own process table (`runsc ps`) is read instead. A failed checkpoint is an error.
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceRecord } from '../../protocol/spec.ts';
import type { DockerEngine, ServiceContainer } from './engine.ts';
import { CheckpointError, tail } from './errors.ts';
import { type ExecOptions, type ExecResult, execIn, processTree, statFields } from './exec.ts';
import { sandboxProcesses } from './gvisor.ts';
import { GVISOR_DOCKER_RUNTIME } from './render.ts';

export type DatabaseKind = 'postgres' | 'redis' | 'mysql';

export interface Database {
  service: string;
  /** Its container: checkpoint commands run there without listing the project's containers again. */
  id: string;
  kind: DatabaseKind;
  /** Container environment (image ENV plus the service's), for user names and passwords. */
  env: Record<string, string>;
  /** Redis: the port redis-server listens on, when its process title says. */
  port?: number;
}

export interface CheckpointResult {
  service: string;
  kind: DatabaseKind;
  detail: string;
  took_ms: number;
}

const PROCESS: [RegExp, DatabaseKind][] = [
  [/^(postgres|postmaster)$/, 'postgres'],
  [/^(redis-server|valkey-server|keydb-server)$/, 'redis'],
  [/^(mysqld|mariadbd)$/, 'mysql'],
];
const IMAGE: [RegExp, DatabaseKind][] = [
  [/(^|\/)(postgres|postgis|timescaledb)[^/]*$/, 'postgres'],
  [/(^|\/)(redis|valkey|keydb)[^/]*$/, 'redis'],
  [/(^|\/)(mysql|mariadb|percona)[^/]*$/, 'mysql'],
];

async function proc(p: number): Promise<{ comm: string; cmdline: string } | null> {
  try {
    const comm = (await readFile(`/proc/${p}/comm`, 'utf8')).trim();
    const cmdline = (await readFile(`/proc/${p}/cmdline`, 'utf8')).replaceAll('\0', ' ').trim();
    return { comm, cmdline };
  } catch {
    return null; // exited while we looked
  }
}

/**
 * What a container runs: its main process first, then (only when the main process is not a
 * database: a shell or an init in front of it) the processes below it. The walk of /proc is the
 * costly part, so a detection shares one (`scan`) between all its containers.
 */
async function processes(pid: number, scan: () => Promise<(root: number) => number[]>) {
  const main = await proc(pid);
  if (main && classify(main)) return { procs: [main], byMain: true };
  const below = (await scan())(pid);
  const rest = await Promise.all(below.map(proc));
  return { procs: [main, ...rest].filter((p) => p !== null), byMain: false };
}

/**
 * What a gVisor container runs, from gVisor's process table: its process 1 first, then the rest
 * (command names only: gVisor's table has no arguments). `byMain` as for processes(): process 1
 * is the sandbox's first task for as long as the sandbox (the host pid kept) lives.
 */
async function sandboxed(pid: number, id: string) {
  const table = await sandboxProcesses(pid, id);
  const procs = table.sort((a, b) => a.pid - b.pid).map((p) => ({ comm: p.cmd, cmdline: p.cmd }));
  const main = procs[0];
  if (main && table[0].pid === 1 && classify(main)) return { procs: [main], byMain: true };
  return { procs, byMain: false };
}

/** A process's start time (field 22 of /proc/<pid>/stat): with the pid, it names one process. */
async function startTime(pid: number): Promise<string | null> {
  try {
    return statFields(await readFile(`/proc/${pid}/stat`, 'utf8'))[19] ?? null;
  } catch {
    return null;
  }
}

/**
 * A database recognised by its container's main process, kept by container id in the engine's
 * state. A container's main process and its environment never change while it runs; a restart
 * gives a new main process, so an entry holds only while the same process (pid and start time)
 * is there. Bounded: the oldest go first.
 */
export interface KnownDatabase {
  pid: number;
  started: string;
  db: Database;
}
const KNOWN_MAX = 1024;

async function knownDatabase(
  known: Map<string, KnownDatabase>,
  id: string,
  svc: ServiceRecord,
): Promise<Database | null> {
  const k = known.get(id);
  if (!k || k.db.service !== svc.name) return null;
  if ((await startTime(k.pid)) === k.started) return k.db;
  known.delete(id);
  return null;
}

async function remember(
  known: Map<string, KnownDatabase>,
  id: string,
  pid: number,
  db: Database,
): Promise<void> {
  const started = await startTime(pid);
  if (!started) return;
  known.delete(id);
  known.set(id, { pid, started, db });
  if (known.size > KNOWN_MAX) known.delete(known.keys().next().value!);
}

function classify(p: { comm: string; cmdline: string }): DatabaseKind | undefined {
  return PROCESS.find(
    ([re]) => re.test(p.comm) || re.test(p.cmdline.split(' ')[0].split('/').pop() ?? ''),
  )?.[1];
}

/**
 * The database services among the running containers of the stack (inspected all at once);
 * `listed`: the stack's containers when the caller has just listed them.
 */
export async function detectDatabases(
  engine: DockerEngine,
  services: ServiceRecord[],
  listed?: ServiceContainer[],
): Promise<Database[]> {
  const running = (listed ?? (await engine.containers())).filter((c) => c.state === 'running');
  let tree: Promise<(root: number) => number[]> | undefined;
  const scan = () => (tree ??= processTree());
  const found = await Promise.all(
    services.map(async (svc): Promise<Database | null> => {
      const c = running.find((x) => x.service === svc.name);
      return c ? recognise(engine, svc, c.id, scan) : null;
    }),
  );
  return found.filter((d) => d !== null);
}

async function recognise(
  engine: DockerEngine,
  svc: ServiceRecord,
  id: string,
  scan: () => Promise<(root: number) => number[]>,
): Promise<Database | null> {
  const cached = await knownDatabase(engine.databases, id, svc);
  if (cached) return cached;
  const info = await engine.docker.getContainer(id).inspect();
  const env = Object.fromEntries(
    (info.Config.Env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const pid = info.State.Pid;
  const { procs, byMain } = !pid
    ? { procs: [], byMain: false }
    : info.HostConfig.Runtime === GVISOR_DOCKER_RUNTIME
      ? await sandboxed(pid, id)
      : await processes(pid, scan);
  let kind: DatabaseKind | undefined;
  let port: number | undefined;
  for (const p of procs) {
    const hit = classify(p);
    if (!hit) continue;
    kind = hit;
    const m = kind === 'redis' ? /:(\d+)\b/.exec(p.cmdline) : null;
    if (m) port = Number(m[1]);
    break;
  }
  if (!kind && !procs.length)
    kind = IMAGE.find(([re]) => re.test(svc.image.split('@')[0].replace(/:[^/:]+$/, '')))?.[1];
  if (!kind) return null;
  const db: Database = { service: svc.name, id, kind, env, port };
  // Found by what the container itself runs: holds for as long as that process does.
  if (byMain) await remember(engine.databases, id, pid, db);
  return db;
}

const execDb = (engine: DockerEngine, db: Database, cmd: string[], opts: ExecOptions) =>
  execIn(engine.docker.getContainer(db.id), db.service, cmd, opts);

function failure(db: Database, what: string, r: ExecResult): CheckpointError {
  const said = tail(`${r.stderr}\n${r.stdout}`, 5) || `exit code ${r.exit_code}`;
  const missing = r.exit_code === 126 || r.exit_code === 127 ? ' (is the client in the image?)' : '';
  return new CheckpointError(
    `checkpoint of ${db.kind} service '${db.service}': ${what} failed${missing}: ${said}`,
  );
}

async function postgres(engine: DockerEngine, db: Database): Promise<string> {
  const user = db.env.POSTGRES_USER || 'postgres';
  const env: Record<string, string> = {};
  if (db.env.POSTGRES_PASSWORD) env.PGPASSWORD = db.env.POSTGRES_PASSWORD;
  const dbs = [...new Set(['postgres', db.env.POSTGRES_DB || user])];
  let last: ExecResult | undefined;
  // The official images allow the `postgres` OS user in over the socket; others may need the
  // container's own user or TCP on loopback. The first way that works is used.
  users: for (const osUser of ['postgres', '']) {
    for (const host of [[], ['-h', '127.0.0.1']]) {
      for (const name of dbs) {
        const cmd = [
          'psql',
          '-X',
          '-v',
          'ON_ERROR_STOP=1',
          ...host,
          '-U',
          user,
          '-d',
          name,
          '-Atc',
          'CHECKPOINT',
        ];
        const r = await execDb(engine, db, cmd, { user: osUser, env, timeoutSec: 120 });
        if (r.exit_code === 0) return `CHECKPOINT as ${user}${host.length ? ' over TCP' : ''}`;
        // The engine reports an exec user missing from /etc/passwd as output with exit code 126.
        if (r.exit_code === 126 && /unable to find user/i.test(r.stdout)) continue users;
        if (r.exit_code === 126 || r.exit_code === 127) throw failure(db, 'psql', r);
        last = r;
      }
    }
  }
  throw failure(db, 'CHECKPOINT', last ?? { exit_code: -1, stdout: '', stderr: 'no way to run psql' });
}

function redisEnv(db: Database): Record<string, string> {
  const password = db.env.REDIS_PASSWORD || db.env.REDIS_AUTH;
  return password ? { REDISCLI_AUTH: password } : {};
}

const redisArgv = (db: Database) => ['redis-cli', ...(db.port ? ['-p', String(db.port)] : [])];

async function redisCli(engine: DockerEngine, db: Database, args: string[]): Promise<string> {
  const r = await execDb(engine, db, [...redisArgv(db), ...args], { env: redisEnv(db), timeoutSec: 60 });
  if (r.exit_code !== 0 || /^(ERR|NOAUTH|WRONGPASS)/m.test(r.stdout)) {
    if (/Background save already in progress/i.test(r.stdout)) return r.stdout;
    throw failure(db, `redis-cli ${args.join(' ')}`, r);
  }
  return r.stdout.trim();
}

function persistence(info: string, key: string): string {
  return new RegExp(`^${key}:(.*)$`, 'm').exec(info)?.[1]?.trim() ?? '';
}

/** Redis's persistence state from one `INFO persistence` (rdb_last_save_time is LASTSAVE). */
async function saveState(engine: DockerEngine, db: Database) {
  const info = await redisCli(engine, db, ['INFO', 'persistence']);
  return {
    running: persistence(info, 'rdb_bgsave_in_progress') !== '0',
    last: Number(persistence(info, 'rdb_last_save_time')),
    status: persistence(info, 'rdb_last_bgsave_status'),
  };
}

/** Between polls of a running save; each poll is a docker exec, itself tens of milliseconds. */
const POLL_MS = 25;

// The usual save in one exec (each exec is tens of milliseconds of Docker's time, and
// BGSAVE then polling INFO took three to five of them): the container's shell asks for the save,
// then every 10 ms looks whether the dump file was replaced (the save's child writes a temporary
// file, syncs it and renames it over the dump as its last step, so a new inode is a complete new
// dump) or INFO says no save runs (Redis notices its child's end only at its next cron tick, up to
// 100 ms later at the default hz; then the status says how it went). Prints `svc-renamed` or the
// last INFO; when the save ended between a look and INFO, one more look prefers the replaced dump
// (under load it did: CI saw INFO win the race). $1 is the poll budget, the rest is the redis-cli
// command. Without CONFIG (renamed away) or `ls`, only INFO is watched. Exit 10: BGSAVE did not
// answer "started" (already running, scheduled behind an AOF rewrite, refused); exit 11: INFO
// failed; exit 12: out of polls.
export const SAVE_SCRIPT = `max=$1; shift
nl='
'
f=
c=$("$@" CONFIG GET dir 2>/dev/null) && b=$("$@" CONFIG GET dbfilename 2>/dev/null) &&
  case $c$b in "dir$nl"*"dbfilename$nl"*) f=\${c#"dir$nl"}/\${b#"dbfilename$nl"};; esac
ino() { i=; [ -n "$f" ] || return 0; i=$(ls -id -- "$f" 2>/dev/null) || i=; i=\${i#"\${i%%[! ]*}"}; i=\${i%% *}; }
ino; was=$i
r=$("$@" BGSAVE 2>&1) || { printf '%s\\n' "$r"; exit 10; }
case $r in *started*) ;; *) printf '%s\\n' "$r"; exit 10;; esac
n=0
while :; do
  ino; [ -n "$i" ] && [ "$i" != "$was" ] && { echo svc-renamed; exit 0; }
  s=$("$@" INFO persistence 2>&1) || { printf '%s\\n' "$s"; exit 11; }
  case $s in *rdb_bgsave_in_progress:0*)
    ino; [ -n "$i" ] && [ "$i" != "$was" ] && { echo svc-renamed; exit 0; }
    printf '%s\\n' "$s"; exit 0;; esac
  n=$((n+1)); [ "$n" -ge "$max" ] && exit 12
  sleep 0.01 2>/dev/null || sleep 1
done`;

/** BGSAVE through SAVE_SCRIPT; null when the image or the reply needs the exec-per-step way. */
async function redisOneExec(engine: DockerEngine, db: Database, timeoutMs: number): Promise<string | null> {
  const polls = String(Math.max(1, Math.ceil(timeoutMs / 10)));
  const r = await execDb(engine, db, ['sh', '-c', SAVE_SCRIPT, 'sh', polls, ...redisArgv(db)], {
    env: redisEnv(db),
    timeoutSec: Math.ceil(timeoutMs / 1000) + 5,
  });
  if (r.exit_code === 12)
    throw new CheckpointError(
      `checkpoint of redis service '${db.service}': BGSAVE did not finish after ${timeoutMs / 1000}s`,
    );
  if (r.exit_code !== 0) return null; // no shell, or a reply the step-by-step way explains
  if (/^svc-renamed$/m.test(r.stdout)) return 'BGSAVE';
  const status = persistence(r.stdout, 'rdb_last_bgsave_status');
  if (status !== 'ok')
    throw new CheckpointError(
      `checkpoint of redis service '${db.service}': BGSAVE status ${status}; the server's log says why (disk full, permissions)`,
    );
  return 'BGSAVE';
}

async function redis(engine: DockerEngine, db: Database, timeoutMs: number): Promise<string> {
  const fast = await redisOneExec(engine, db, timeoutMs);
  if (fast) return fast;
  const deadline = Date.now() + timeoutMs;
  const overdue = (what: string) => {
    if (Date.now() > deadline)
      throw new CheckpointError(
        `checkpoint of redis service '${db.service}': BGSAVE ${what} after ${timeoutMs / 1000}s`,
      );
  };
  let sent = Date.now();
  let reply = await redisCli(engine, db, ['BGSAVE']);
  // A save already running was forked before our caller's last writes: let it end, then save anew.
  while (/already in progress/i.test(reply)) {
    overdue('still running');
    await sleep(POLL_MS);
    sent = Date.now();
    reply = await redisCli(engine, db, ['BGSAVE']);
  }
  // "started": the child is forked before the reply, so the first idle state after it is our save
  // ending (well or not). "scheduled" (an AOF rewrite runs): our save is the first one to end in a
  // later second than the request (the save time has one-second resolution).
  let seenRunning = /started/i.test(reply);
  for (;;) {
    const s = await saveState(engine, db);
    seenRunning ||= s.running;
    if (!s.running && (seenRunning || s.last > Math.floor(sent / 1000))) {
      if (s.status !== 'ok')
        throw new CheckpointError(
          `checkpoint of redis service '${db.service}': BGSAVE status ${s.status}; the server's log says why (disk full, permissions)`,
        );
      return 'BGSAVE, polled from svcd';
    }
    overdue('did not finish');
    await sleep(POLL_MS);
  }
}

async function mysql(engine: DockerEngine, db: Database): Promise<string> {
  const env: Record<string, string> = {};
  const password = db.env.MYSQL_ROOT_PASSWORD || db.env.MARIADB_ROOT_PASSWORD;
  if (password) env.MYSQL_PWD = password;
  let last: ExecResult | undefined;
  for (const client of ['mysql', 'mariadb']) {
    last = await execDb(engine, db, [client, '-uroot', '-e', 'FLUSH TABLES'], { env, timeoutSec: 120 });
    if (last.exit_code === 0) return `FLUSH TABLES (${client})`;
    if (last.exit_code !== 126 && last.exit_code !== 127) break;
  }
  throw failure(db, 'FLUSH TABLES', last!);
}

/**
 * Checkpoints every database service, all at once (a snapshot waits for the slowest, not their
 * sum); throws CheckpointError when one fails, after all have ended.
 */
export async function checkpointDatabases(
  engine: DockerEngine,
  services: ServiceRecord[],
  timeoutMs = 120_000,
  listed?: ServiceContainer[],
): Promise<CheckpointResult[]> {
  const one = async (db: Database): Promise<CheckpointResult> => {
    const t0 = Date.now();
    let detail: string;
    if (db.kind === 'postgres') detail = await postgres(engine, db);
    else if (db.kind === 'redis') detail = await redis(engine, db, timeoutMs);
    else detail = await mysql(engine, db);
    return { service: db.service, kind: db.kind, detail, took_ms: Date.now() - t0 };
  };
  const settled = await Promise.allSettled((await detectDatabases(engine, services, listed)).map(one));
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<CheckpointResult>).value);
}
