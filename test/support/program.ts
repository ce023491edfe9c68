// The real `svc-server` program as a child process on a free loopback port, for tests of the
// program itself (its lifecycle, signals, what makes it exit and what must not).
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';

const PROGRAM = new URL('../../programs/svc-server.ts', import.meta.url).pathname;

export interface Child {
  proc: ChildProcess;
  url: string;
  stdout(): string;
  stderr(): string;
  exited: Promise<number | null>;
}

export interface ChildOptions {
  /** Node flags before the program, e.g. `--import` of a module that injects faults. */
  nodeArgs?: string[];
  /** Opens an IPC channel to the child (`proc.send`). */
  ipc?: boolean;
  /** The port to listen on (default: a free one). */
  port?: number;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Starts programs/svc-server.ts on `db` and waits until /health answers. */
export async function startChild(
  db: string,
  env: Record<string, string> = {},
  opts: ChildOptions = {},
): Promise<Child> {
  const port = opts.port ?? (await freePort());
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SVC_')));
  const proc = spawn(
    process.execPath,
    [...(opts.nodeArgs ?? []), PROGRAM, '-addr', `127.0.0.1:${port}`, '--db', db],
    {
      env: { ...clean, ...env },
      stdio: ['ignore', 'pipe', 'pipe', ...(opts.ipc ? (['ipc'] as const) : [])],
    },
  );
  let out = '';
  let err = '';
  proc.stdout?.on('data', (c) => {
    out += c;
  });
  proc.stderr?.on('data', (c) => {
    err += c;
  });
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`svc-server exited ${proc.exitCode}: ${err}`);
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { proc, url, stdout: () => out, stderr: () => err, exited };
}

/** SIGTERM, then the exit status. */
export async function stop(child: Child): Promise<number | null> {
  child.proc.kill('SIGTERM');
  return child.exited;
}
