// Live processes of an environment (spec "Live processes"): start, list, one, input, signal,
// resize and follow, each one command to the environment's host (the proc.* kinds). The host's
// refusals become 404 (no such process), 409 (the environment's process limit, stdin closed or
// absent, process exited) or 502 (anything else the host could not do).

import type {
  ProcessInputBody,
  ProcessRecord,
  ProcessSignalBody,
  ProcessStartBody,
} from '../../protocol/api.ts';
import type { Payloads } from '../../protocol/commands.ts';
import { NO_SUCH_PROCESS, PROCESS_LIMIT, PROCESS_REFUSED } from '../../protocol/processes.ts';
import type { AppContext } from '../context.ts';
import { targetFor } from '../envs/io.ts';
import { BadRequest, Conflict, NotFound, Upstream } from '../errors.ts';
import { CommandError } from '../hosts/dispatcher.ts';
import type { Caller } from '../identity/auth.ts';
import type { FollowerSink } from './sink.ts';

/** Bound of a start (an exec create and start on the engine) and of every other process command. */
const START_TIMEOUT_MS = 60_000;
const COMMAND_TIMEOUT_MS = 30_000;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const MAX_ENV_VARS = 1000;

async function hostCall<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    const m = err.message;
    if (m.startsWith(NO_SUCH_PROCESS)) throw new NotFound(m);
    if (m.startsWith(PROCESS_LIMIT) || m.startsWith(PROCESS_REFUSED)) throw new Conflict(m);
    throw new Upstream(m);
  }
}

export async function startProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  body: ProcessStartBody,
): Promise<{ pid: string }> {
  const env = body.env ?? {};
  const names = Object.keys(env);
  if (names.length > MAX_ENV_VARS) throw new BadRequest(`env has more than ${MAX_ENV_VARS} variables`);
  for (const name of names)
    if (!ENV_NAME.test(name) || name.length > 1024)
      throw new BadRequest(`env name '${name.slice(0, 100)}' must be letters, digits, _ . - (not first)`);
  for (const v of Object.values(env))
    if (v.includes('\0')) throw new BadRequest('env values may not contain NUL');
  if (body.cmd.some((a) => a.includes('\0'))) throw new BadRequest('cmd may not contain NUL');
  if (body.cmd[0] === '') throw new BadRequest('cmd[0] must name a program');
  if (body.cwd && (!body.cwd.startsWith('/') || body.cwd.includes('\0')))
    throw new BadRequest('cwd must be an absolute path');
  if (body.user?.includes('\0')) throw new BadRequest('user may not contain NUL');
  const { env: e, target } = await targetFor(ctx, caller, envId, body.service);
  const payload: Payloads['proc.start'] = {
    service: body.service,
    cmd: body.cmd,
    env,
    cwd: body.cwd ?? '',
    user: body.user ?? '',
    stdin: body.stdin ?? false,
    tty: body.tty ?? null,
  };
  const r = await hostCall(ctx.dispatcher.run(target, e.ID, 'proc.start', payload, START_TIMEOUT_MS));
  return { pid: r.pid };
}

export async function listProcesses(ctx: AppContext, caller: Caller, envId: string, pid = '') {
  const { env, target } = await targetFor(ctx, caller, envId);
  const r = await hostCall(ctx.dispatcher.run(target, env.ID, 'proc.list', { pid }, COMMAND_TIMEOUT_MS));
  return r.processes;
}

export async function getProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  pid: string,
): Promise<ProcessRecord> {
  const [p] = await listProcesses(ctx, caller, envId, pid);
  if (!p) throw new NotFound(`process ${pid} not found`);
  return p;
}

/** One control message for a process, as the host takes it. */
export type Control =
  | { kind: 'proc.input'; payload: Payloads['proc.input'] }
  | { kind: 'proc.signal'; payload: Payloads['proc.signal'] }
  | { kind: 'proc.resize'; payload: Payloads['proc.resize'] };

/**
 * Sends a control message in its process's lane (input, resize and signal of one process reach
 * the host and are applied in the order they entered it; none waits for the environment's queue).
 * It enters the lane once `after` resolved and it was checked: `entered` says so, and a caller
 * with messages in order (a WebSocket) passes it on as the next one's `after`, so none waits for
 * the answer of the one before. `done` is its outcome.
 */
export function controlProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  msg: Control,
  after: Promise<void> = Promise.resolve(),
): { entered: Promise<void>; done: Promise<void> } {
  let enter!: () => void;
  const entered = new Promise<void>((r) => {
    enter = r;
  });
  const done = (async () => {
    try {
      if (msg.kind === 'proc.input') {
        const { data, close } = msg.payload;
        if (!data && !close) throw new BadRequest('input needs data, close, or both');
        if (data && !isBase64(data)) throw new BadRequest('data must be base64');
      }
      const { env, target } = await targetFor(ctx, caller, envId);
      await after;
      const lane = `proc/${env.ID}/${msg.payload.pid}`;
      const sent = ctx.dispatcher.run(
        target,
        env.ID,
        msg.kind,
        msg.payload,
        COMMAND_TIMEOUT_MS,
        undefined,
        lane,
      );
      enter();
      await hostCall(sent);
    } finally {
      enter();
    }
  })();
  return { entered, done };
}

export function inputProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  pid: string,
  body: ProcessInputBody,
): Promise<void> {
  const payload = { pid, data: body.data ?? '', close: body.close ?? false };
  return controlProcess(ctx, caller, envId, { kind: 'proc.input', payload }).done;
}

export function signalProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  pid: string,
  body: ProcessSignalBody,
): Promise<void> {
  return controlProcess(ctx, caller, envId, { kind: 'proc.signal', payload: { pid, signal: body.signal } })
    .done;
}

export function resizeProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  pid: string,
  size: { rows: number; cols: number },
): Promise<void> {
  return controlProcess(ctx, caller, envId, { kind: 'proc.resize', payload: { pid, ...size } }).done;
}

/** Attaches `sink` (replay after `since`, then live); 404 for a pid the host does not know. */
export async function followProcess(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  pid: string,
  since: number,
  sink: FollowerSink,
): Promise<ProcessRecord> {
  const { env, target } = await targetFor(ctx, caller, envId);
  return hostCall(ctx.processes.attach(target, env.ID, pid, since, sink));
}

/** Standard base64 with padding (what the API documents); checked without a regex on user input. */
function isBase64(s: string): boolean {
  if (s.length % 4 !== 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 65 && c <= 90) ||
      (c >= 97 && c <= 122) ||
      (c >= 48 && c <= 57) ||
      c === 43 ||
      c === 47 ||
      (c === 61 && i >= s.length - 2);
    if (!ok) return false;
  }
  return true;
}
