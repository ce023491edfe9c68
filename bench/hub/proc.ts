// Child processes and clean-up for the hub benchmark: the control plane (the svc-server program,
// or bench/hub/hub-server.ts for the dispatcher mode), the simulated sidecars, and a registry of
// clean-up steps run on every way out (normal end, failure, Ctrl-C, SIGTERM).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

const ROOT = new URL('../../', import.meta.url).pathname;
const STOP_WAIT_MS = 15_000;

const cleanups: (() => void | Promise<void>)[] = [];

/** A flag's value as a number ≥ 0, or an error that names the flag. */
export function nonNegative(flag: string, text: string): number {
  const v = Number(text);
  if (!Number.isFinite(v) || v < 0) throw new Error(`--${flag}: a number ≥ 0, got '${text}'`);
  return v;
}

/** Registers a clean-up step; the latest registered runs first. Returns a function that runs it now. */
export function onCleanup(fn: () => void | Promise<void>): () => Promise<void> {
  let done = false;
  const once = async () => {
    if (done) return;
    done = true;
    await fn();
  };
  cleanups.push(once);
  return once;
}

export async function cleanupAll(): Promise<void> {
  while (cleanups.length) {
    try {
      await cleanups.pop()!();
    } catch (err) {
      process.stderr.write(`clean-up: ${(err as Error).message}\n`);
    }
  }
}

/** Runs the clean-up on Ctrl-C, SIGTERM and crashes, then exits. */
export function installExitHandlers(): void {
  let exiting = false;
  const bail = (code: number, why: string) => {
    if (exiting) return;
    exiting = true;
    process.stderr.write(`\nbench/hub: ${why}: cleaning up\n`);
    void cleanupAll().finally(() => process.exit(code));
  };
  process.on('SIGINT', () => bail(130, 'interrupted'));
  process.on('SIGTERM', () => bail(143, 'terminated'));
  process.on('uncaughtException', (err) => bail(1, err.stack ?? String(err)));
  process.on('unhandledRejection', (err) => bail(1, (err as Error)?.stack ?? String(err)));
}

/** The soft and hard open-file limits of this process. */
export function fdLimits(): { soft: number; hard: number } {
  const [soft, hard] = execFileSync(
    'prlimit',
    ['--pid', String(process.pid), '--nofile', '--raw', '--noheadings', '--output', 'SOFT,HARD'],
    {
      encoding: 'utf8',
    },
  )
    .trim()
    .split(/\s+/)
    .slice(-2)
    .map((v) => (v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v)));
  return { soft, hard };
}

/**
 * 10,000 streams plus HTTP and database sockets in one process: more than the usual 1,024.
 * Raises both limits to `n` (children inherit them); where that is refused (a container without
 * CAP_SYS_RESOURCE) it keeps the hard limit, which Node already uses as its soft limit, and says
 * whether that is enough for `needed` descriptors per process.
 */
export function raiseFdLimit(n: number, needed: number): void {
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${n}`], { stdio: 'pipe' });
    return;
  } catch {
    // Not permitted: fall back to the hard limit.
  }
  const { soft, hard } = fdLimits();
  try {
    if (soft < hard) execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${hard}:${hard}`]);
  } catch {
    // Keep what we have.
  }
  const have = Math.max(soft, hard);
  const enough = have >= needed;
  process.stderr.write(
    `bench/hub: open-file limit stays at ${have} (raising it to ${n} was refused): ${enough ? 'enough' : 'NOT enough'} for ${needed} per process\n`,
  );
  if (!enough) throw new Error(`open-file limit ${have} is below the ${needed} this run needs`);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface Child {
  proc: ChildProcess;
  pid: number;
  log: string;
  /** SIGTERM, then SIGKILL after 15 s; resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts `script` (relative to the repository) with Node, its output in `log`, with an IPC
 * channel. `cpus` (a taskset list such as `0` or `1-3`) confines the child to those CPUs;
 * taskset execs node, so the pid is node's.
 */
export function startChild(
  script: string,
  args: string[],
  env: Record<string, string>,
  log: string,
  cpus?: string,
): Child {
  const fd = openSync(log, 'a');
  const argv = [process.execPath, join(ROOT, script), ...args];
  const [cmd, ...rest] = cpus ? ['taskset', '-c', cpus, ...argv] : argv;
  const proc = spawn(cmd, rest, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd, 'ipc'],
  });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const stop = onCleanup(async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_WAIT_MS);
    await exited;
    clearTimeout(timer);
  });
  if (!proc.pid) throw new Error(`${script} did not start`);
  return { proc, pid: proc.pid, log, stop };
}

/** The next IPC message from `child` that `match` accepts; rejects if the child exits first. */
export function nextMessage<T>(child: Child, match: (m: any) => boolean, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMsg = (m: unknown) => {
      if (!match(m)) return;
      done();
      resolve(m as T);
    };
    const onExit = (code: number | null, signal: string | null) => {
      done();
      reject(new Error(`child exited (${code ?? signal}) — see ${child.log}:\n${tail(child.log)}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no answer from the child within ${timeoutMs / 1000} s — see ${child.log}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      child.proc.off('message', onMsg);
      child.proc.off('exit', onExit);
    };
    child.proc.on('message', onMsg);
    child.proc.once('exit', onExit);
  });
}

/** Polls GET /health until it answers 200. */
export async function waitHealthy(child: Child, url: string, timeoutMs = 60_000): Promise<void> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (child.proc.exitCode !== null) throw new Error(`control plane exited:\n${tail(child.log)}`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`control plane not healthy within ${timeoutMs / 1000} s:\n${tail(child.log)}`);
}

export function tail(path: string, lines = 15): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** The postmaster of the cluster listening on `port` (its command line carries `-p <port>`). */
export function postmasterPid(port: number): number | null {
  for (const line of execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).split('\n')) {
    const m = /^\s*(\d+)\s+(\S*\/postgres)\s.*-p (\d+)\b/.exec(line);
    if (m && Number(m[3]) === port) return Number(m[1]);
  }
  return null;
}

/**
 * `--pin`: the control plane gets CPU 0 to itself, and this process (the load generator) and the
 * simulated sidecars share the others, so the control plane's figures are those of one core (the
 * unit of the issue-15 goal: "2,300/s on one core"). Needs 2+ CPUs and util-linux's taskset.
 */
export function pinning(cpuCount: number): { controlPlane: string; rest: string } {
  if (cpuCount < 2) throw new Error('--pin needs at least 2 CPUs');
  const rest = cpuCount === 2 ? '1' : `1-${cpuCount - 1}`;
  // -a: every thread of this process; a thread that ends meanwhile fails the call, so try again.
  for (let attempt = 1; ; attempt++) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', rest, String(process.pid)], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      break;
    } catch (err) {
      if (attempt < 3) continue;
      const why = String((err as { stderr?: Buffer }).stderr ?? (err as Error).message).trim();
      throw new Error(`--pin: taskset failed (${why}); is util-linux installed?`);
    }
  }
  return { controlPlane: '0', rest };
}
