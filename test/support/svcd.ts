// The argv that runs the source svcd's `join` against a test server, shared by the e2e harness,
// the sidecar protocol tests and the benchmarks.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

export interface SvcdOptions {
  /** Node flags before the program, e.g. `--import` of a module that injects faults. */
  nodeArgs?: string[];
  /** Opens an IPC channel to the child (`send`). */
  ipc?: boolean;
}

/** The child's exit status, once it has exited. */
export const exited = (c: ChildProcess) =>
  new Promise<number | null>((r) =>
    c.exitCode !== null ? r(c.exitCode) : c.once('exit', (code) => r(code)),
  );

/** Polls `cond` every 25 ms until it holds; throws naming `what` after `ms`. */
export async function until(cond: () => boolean, ms = 20_000, what = 'condition'): Promise<void> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Runs the source svcd with `args`; `out()` is its stdout and stderr so far. */
export function svcd(
  args: string[],
  env: Record<string, string> = {},
  opts: SvcdOptions = {},
): ChildProcess & { out: () => string } {
  let out = '';
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), 'programs/svcd.ts', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', ...(opts.ipc ? (['ipc'] as const) : [])],
  });
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (out += d));
  return Object.assign(child, { out: () => out });
}

/** `programs/svcd.ts join <credential flags> --state … --data …`. */
function joinArgs(credential: string[], stateDir: string, dataDir: string): string[] {
  return [
    'programs/svcd.ts',
    'join',
    ...credential,
    '--state',
    join(stateDir, 'host.json'),
    '--data',
    dataDir,
  ];
}

/** `programs/svcd.ts join …` with the state file in `stateDir` and data in `dataDir` (default `<stateDir>/data`). */
export function svcdJoinArgs(
  server: string,
  token: string,
  stateDir: string,
  dataDir = join(stateDir, 'data'),
): string[] {
  return joinArgs(['--server', server, '--token', token], stateDir, dataDir);
}

/** `programs/svcd.ts join --env-file <file> …`: how a provisioned machine's join.env is used. */
export function svcdEnvFileArgs(
  envFile: string,
  stateDir: string,
  dataDir = join(stateDir, 'data'),
): string[] {
  return joinArgs(['--env-file', envFile], stateDir, dataDir);
}
