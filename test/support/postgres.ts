// A throwaway Postgres cluster on a temp dir, for the storage tests' second dialect.
// initdb refuses to run as root, so the cluster runs as the `postgres` user when there is one
// (Debian's package creates it), else as `nobody`.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface Cluster {
  dsn: string;
  stop(): void;
}

const BIN_DIRS = [
  '/usr/local/bin',
  '/usr/lib/postgresql/17/bin',
  '/usr/lib/postgresql/16/bin',
  '/usr/lib/postgresql/15/bin',
];

export function findPgBin(): string | null {
  for (const dir of BIN_DIRS) {
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  return null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

function uidOf(user: string): { uid: number; gid: number } | null {
  try {
    const uid = Number(execFileSync('id', ['-u', user]).toString().trim());
    const gid = Number(execFileSync('id', ['-g', user]).toString().trim());
    return { uid, gid };
  } catch {
    return null;
  }
}

export async function startCluster(): Promise<Cluster> {
  const bin = findPgBin();
  if (!bin) throw new Error('no Postgres server binaries (initdb, pg_ctl) found');
  const dir = mkdtempSync(join(tmpdir(), 'svc-pg-'));
  chmodSync(dir, 0o755);
  const data = join(dir, 'data');
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? (uidOf('postgres') ? 'postgres' : 'nobody') : null;
  if (user) {
    const ids = uidOf(user)!;
    chownSync(dir, ids.uid, ids.gid);
  }
  const run = (cmd: string, args: string[]) => {
    const full = user ? ['runuser', ['-u', user, '--', join(bin, cmd), ...args]] : [join(bin, cmd), args];
    execFileSync(full[0] as string, full[1] as string[], { stdio: 'pipe', cwd: dir });
  };
  run('initdb', ['-D', data, '-U', 'svc', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  run('pg_ctl', ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', 'start']);
  const stop = () => {
    try {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Already stopped.
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { dsn: `postgres://svc@127.0.0.1:${port}/postgres`, stop };
}

/** Creates a fresh database in the cluster behind `dsn` and returns its DSN. */
export async function createDatabase(dsn: string, name: string): Promise<string> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: dsn });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name.replace(/"/g, '')}"`);
  } finally {
    await client.end();
  }
  const url = new URL(dsn);
  url.pathname = `/${name}`;
  return url.toString();
}

// Used by test/run.ts as a child process so the cluster outlives nothing but the test run.
if (import.meta.main) {
  const c = await startCluster();
  process.stdout.write(`${c.dsn}\n`);
  const end = () => {
    c.stop();
    process.exit(0);
  };
  process.on('SIGTERM', end);
  process.on('SIGINT', end);
  spawn('sleep', ['infinity'], { stdio: 'ignore' }).unref();
  setInterval(() => {}, 1 << 30);
}
