// Runs a command in a container through the Engine API (no `docker` CLI, no TTY), with stdout and
// stderr kept apart and a timeout. The Engine API cannot kill an exec, so on timeout the exec's
// host pid (from exec inspect) and its descendants are SIGKILLed: the sidecar runs as root on the
// engine's host. When that is impossible (remote engine) the exec is abandoned and said so. Under
// gVisor that pid is runsc's exec proxy, and the process is found and killed in the sandbox too
// (gvisor-exec.ts), on the timeout path only.
import { readdir, readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import { settledWithin, sleep } from '../../shared/concurrency.ts';
import { guard } from '../../shared/faults.ts';
import { DockerError, dockerMessage, ExecNotCreated, ExecTimeout } from './errors.ts';
import { execProxy, killSandboxExec } from './gvisor-exec.ts';
import { Demuxer, TailBuffer } from './mux.ts';

export interface ExecOptions {
  /** Default 120 s (spec: exec default timeout). */
  timeoutSec?: number;
  /** `uid[:gid]` or a user name; default the container's user. */
  user?: string;
  env?: Record<string, string>;
  workingDir?: string;
  /** Per stream; the tail is kept. Default 4 MiB (a result frame is at most 16 MiB). */
  maxOutputBytes?: number;
  /** May run on the container's spare exec (spare.ts): only env.exec, the user's own commands. */
  spare?: boolean;
}

export interface ExecResult {
  exit_code: number;
  stdout: string;
  stderr: string;
}

export const DEFAULT_MAX_OUTPUT = 4 * 1024 * 1024;

export function checkCommand(cmd: unknown): string[] {
  if (!Array.isArray(cmd) || cmd.length === 0 || !cmd.every((a) => typeof a === 'string') || cmd[0] === '')
    throw new DockerError('exec needs a command: a non-empty list of strings, program first');
  return cmd as string[];
}

/** Runs `cmd` in `container` (named `service` in messages). */
export async function execIn(
  container: Docker.Container,
  service: string,
  cmd: string[],
  opts: ExecOptions = {},
): Promise<ExecResult> {
  checkCommand(cmd);
  const timeoutSec = opts.timeoutSec ?? 120;
  if (!(timeoutSec > 0))
    throw new DockerError(`exec timeout must be a positive number of seconds, got ${timeoutSec}`);
  const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
  let exec: Docker.Exec;
  let stream: NodeJS.ReadableStream;
  try {
    exec = await container.exec({
      Cmd: cmd,
      AttachStdin: false,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      User: opts.user ?? '',
      WorkingDir: opts.workingDir,
      Env: opts.env ? Object.entries(opts.env).map(([k, v]) => `${k}=${v}`) : undefined,
    });
  } catch (err) {
    throw new ExecNotCreated(`exec in service '${service}': ${dockerMessage(err)}`);
  }
  try {
    stream = (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
  } catch (err) {
    throw new DockerError(`exec in service '${service}': ${dockerMessage(err)}`);
  }
  const out = new TailBuffer(max);
  const errOut = new TailBuffer(max);
  const demux = new Demuxer((type, payload) => (type === 2 ? errOut : out).push(payload));
  stream.on(
    'data',
    guard('exec: output', (chunk: Buffer) => demux.write(chunk)),
  );
  return finishExec({ exec, service, cmd, stream, ended: streamEnded(stream), out, errOut }, timeoutSec);
}

/** Settles when the exec's attached stream ends (or closes); rejects on a stream error. */
export function streamEnded(stream: NodeJS.ReadableStream): Promise<void> {
  const ended = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  ended.catch(() => {}); // a late stream error after a timeout must not become an unhandled rejection
  return ended;
}

/** A started exec whose output is being collected (a plain one, or a spare that was handed a command). */
export interface RunningExec {
  exec: Docker.Exec;
  service: string;
  /** The command it runs (under gVisor, what its task in the sandbox is named after). */
  cmd: string[];
  stream: NodeJS.ReadableStream;
  ended: Promise<void>;
  out: TailBuffer;
  errOut: TailBuffer;
}

/**
 * Waits for the output to end within `timeoutSec` and reads the exit code; past the timeout the
 * exec's process tree is killed and ExecTimeout carries what it printed.
 */
export async function finishExec(run: RunningExec, timeoutSec: number): Promise<ExecResult> {
  const { exec, service, stream, ended, out, errOut } = run;
  if (!(await settledWithin(ended, timeoutSec * 1000))) {
    const kill = await killExec(exec, run.cmd);
    // What the command wrote before dying is still in flight; give it a moment.
    await settledWithin(ended, 2000);
    (stream as unknown as { destroy?: () => void }).destroy?.();
    throw new ExecTimeout(service, timeoutSec, { stdout: out.text(), stderr: errOut.text() }, kill);
  }
  try {
    await ended;
  } catch (err) {
    throw new DockerError(`exec in service '${service}': ${dockerMessage(err)}`);
  }
  return { exit_code: await exitCode(exec, service), stdout: out.text(), stderr: errOut.text() };
}

/** The exit code; the engine can report the stream closed a moment before it records the exit. */
export async function exitCode(exec: Docker.Exec, service: string): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && info.ExitCode !== null && info.ExitCode !== undefined) return info.ExitCode;
    await sleep(20);
  }
  throw new DockerError(
    `exec in service '${service}': the engine reported no exit code after the output closed`,
  );
}

/** SIGKILLs the exec's process tree; returns the sentence the timeout error ends with. */
async function killExec(exec: Docker.Exec, cmd: string[]): Promise<string> {
  let pid = 0;
  try {
    const info = await exec.inspect();
    if (!info.Running) return 'the command had just exited';
    pid = info.Pid;
  } catch (err) {
    return `the command was abandoned (exec inspect failed: ${dockerMessage(err)})`;
  }
  if (!pid) return 'the command was abandoned (the engine reported no pid)';
  // Under gVisor the pid is runsc's exec proxy: the process itself is in the sandbox.
  const proxy = await execProxy(pid);
  const sandboxed = proxy ? await killSandboxExec(proxy, cmd) : null;
  const tree = [pid, ...(await descendants(pid))];
  const failed: string[] = [];
  for (const p of tree) {
    try {
      process.kill(p, 'SIGKILL');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') failed.push(`${p}: ${(err as Error).message}`);
    }
  }
  if (sandboxed && !sandboxed.killed) return `the command's exec proxy was killed, but ${sandboxed.note}`;
  return failed.length
    ? `the command was abandoned (could not kill host pids ${failed.join(', ')})`
    : 'the command was killed';
}

/**
 * The fields of a /proc/<pid>/stat line after the command name, from the state (field 3) on: the
 * name may contain spaces and parentheses, so they start after the last ')'.
 */
export function statFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** Every process below `root`, from /proc/<pid>/stat's ppid field. */
export async function descendants(root: number): Promise<number[]> {
  return (await processTree())(root);
}

/** One walk of /proc; the function it gives lists the processes below any root in that walk. */
export async function processTree(): Promise<(root: number) => number[]> {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return () => [];
  }
  await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map(async (e) => {
        try {
          const parent = Number(statFields(await readFile(`/proc/${e}/stat`, 'utf8'))[1]);
          const list = children.get(parent);
          if (list) list.push(Number(e));
          else children.set(parent, [Number(e)]);
        } catch {
          // exited while we looked
        }
      }),
  );
  return (root) => {
    const out: number[] = [];
    const queue = [root];
    const seen = new Set(queue); // pids reused during the walk could make a loop
    for (let i = 0; i < queue.length; i++) {
      for (const child of children.get(queue[i]) ?? []) {
        if (seen.has(child)) continue;
        seen.add(child);
        out.push(child);
        queue.push(child);
      }
    }
    return out;
  };
}
