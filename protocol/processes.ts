// Live processes (spec "Live processes"): the command payloads and results of the `proc.*` kinds,
// the limits both sides apply, and the binary host-stream frames that carry a process's output
// from the sidecar to the control plane while it runs. Output never travels as JSON on the host
// stream: a frame is a small header (kind, follower id, two numbers) and the raw bytes, so a
// process printing 100 MiB costs no base64 and no JSON parse per chunk.
import { type Static, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';

export const PROCESS_KINDS = [
  'proc.start',
  'proc.input',
  'proc.signal',
  'proc.resize',
  'proc.list',
  'proc.attach',
  'proc.detach',
] as const;

/** Running processes per environment; one more is refused (409). */
export const MAX_PROCESSES_PER_ENV = 64;
/** Exited processes an environment keeps for listing and replay; the oldest are forgotten first. */
export const MAX_EXITED_PER_ENV = 64;
/** Output each process keeps for replay (`since`), in bytes; older output is a `gap`. */
export const PROCESS_RING_BYTES = 1024 * 1024;
/** Largest stdin chunk (decoded bytes) one input carries. */
export const MAX_STDIN_CHUNK = 64 * 1024;
/** Output is sent in frames of at most this many bytes (small writes are coalesced up to it). */
export const MAX_OUTPUT_FRAME = 64 * 1024;
/** Followers attached at once to one process on one host. */
export const MAX_FOLLOWERS_PER_PROCESS = 64;
/** Terminal size bounds. */
export const MAX_TTY = 10_000;

/** Refusals a control plane maps to an HTTP status (the sidecar's error text starts with them). */
export const NO_SUCH_PROCESS = 'no such process';
export const PROCESS_LIMIT = 'process limit';
export const PROCESS_REFUSED = 'process refused';

export const SIGNALS = [
  'TERM',
  'KILL',
  'INT',
  'HUP',
  'QUIT',
  'USR1',
  'USR2',
  'STOP',
  'CONT',
  'WINCH',
] as const;
export type SignalName = (typeof SIGNALS)[number];

const Str = Type.String();
const Pid = Type.String({ minLength: 1, maxLength: 100 });
const Dim = Type.Integer({ minimum: 1, maximum: MAX_TTY });
export const TtySchema = Type.Object({ rows: Dim, cols: Dim });

/** What a process is, as `proc.list` answers and GET /v1/envs/{env}/processes shows it. */
export const ProcessInfoSchema = Type.Object({
  pid: Str,
  service: Str,
  cmd: Type.Array(Str),
  status: Type.Union([Type.Literal('running'), Type.Literal('exited')]),
  exit_code: Type.Optional(Type.Union([Type.Number(), Type.Null()])),
  signal: Type.Optional(Str),
  started_at: Str,
  tty: Type.Boolean(),
  stdin: Type.Boolean(),
});
export type ProcessInfo = Static<typeof ProcessInfoSchema>;

export const PROCESS_PAYLOADS = {
  'proc.start': Type.Object({
    service: Str,
    cmd: Type.Array(Str, { minItems: 1 }),
    env: Type.Record(Type.String(), Type.String(), { default: {} }),
    cwd: Type.String({ default: '' }),
    user: Type.String({ default: '' }),
    stdin: Type.Boolean({ default: false }),
    tty: Type.Union([TtySchema, Type.Null()], { default: null }),
  }),
  /** `data` is base64; `close` half-closes stdin after it. */
  'proc.input': Type.Object({
    pid: Pid,
    data: Type.String({ default: '' }),
    close: Type.Boolean({ default: false }),
  }),
  'proc.signal': Type.Object({ pid: Pid, signal: Type.Union(SIGNALS.map((s) => Type.Literal(s))) }),
  'proc.resize': Type.Object({ pid: Pid, rows: Dim, cols: Dim }),
  /** Every process of the environment, or only `pid`'s. */
  'proc.list': Type.Object({ pid: Type.String({ default: '' }) }),
  /**
   * Follows `pid` as follower `follow` (an id the control plane chose): what the ring still holds
   * after `since` is sent first (a `gap` for what it no longer holds), then live output, then `end`.
   */
  'proc.attach': Type.Object({
    pid: Pid,
    follow: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' }),
    since: Type.Integer({ minimum: 0, default: 0 }),
  }),
  /** Stops sending to a follower (its client went away). Unknown followers are no error. */
  'proc.detach': Type.Object({ follow: Type.String({ maxLength: 64 }) }),
};

const Empty = Type.Object({});
export const PROCESS_RESULTS = {
  'proc.start': Type.Object({ pid: Str, started_at: Str }),
  'proc.input': Empty,
  'proc.signal': Empty,
  'proc.resize': Empty,
  'proc.list': Type.Object({ processes: Type.Array(ProcessInfoSchema) }),
  'proc.attach': Type.Object({ process: ProcessInfoSchema }),
  'proc.detach': Empty,
};

// ---- binary output frames (sidecar → control plane) ----

export const OUTPUT_KIND = { stdout: 1, stderr: 2, gap: 3, end: 4 } as const;
const KIND_NAMES = ['', 'stdout', 'stderr', 'gap', 'end'] as const;

/** How a process ended, as the `end` frame carries it and the client sees it. */
export const ProcessEndSchema = Type.Object({
  exit_code: Type.Union([Type.Integer(), Type.Null()]),
  signal: Type.Optional(Type.String({ maxLength: 16 })),
  /** Why the stream ended without the process's own exit (host stream dropped, unknown pid). */
  reason: Type.Optional(Type.String({ maxLength: 500 })),
});
export type ProcessEnd = Static<typeof ProcessEndSchema>;
const END_CHECK = TypeCompiler.Compile(ProcessEndSchema);

/** One output frame: `a` is the seq (output), the first dropped seq (gap) or 0 (end); `b` the last dropped seq (gap). */
export type OutputFrame =
  | { kind: 'stdout' | 'stderr'; follow: string; seq: number; data: Buffer }
  | { kind: 'gap'; follow: string; from: number; to: number }
  | { kind: 'end'; follow: string; end: ProcessEnd };

const FOLLOW_RE = /^[A-Za-z0-9_-]{1,64}$/;
const HEAD = 2 + 16;

export class OutputFrameError extends Error {}

/** `[kind u8][follow length u8][follow ascii][a f64 BE][b f64 BE][body]`. */
export function encodeOutput(f: OutputFrame): Buffer {
  const body =
    f.kind === 'stdout' || f.kind === 'stderr'
      ? f.data
      : f.kind === 'end'
        ? Buffer.from(JSON.stringify(f.end))
        : Buffer.alloc(0);
  const n = Buffer.byteLength(f.follow);
  const out = Buffer.allocUnsafe(HEAD + n + body.length);
  out[0] = OUTPUT_KIND[f.kind];
  out[1] = n;
  out.write(f.follow, 2, 'latin1');
  const a = f.kind === 'gap' ? f.from : f.kind === 'end' ? 0 : f.seq;
  out.writeDoubleBE(a, 2 + n);
  out.writeDoubleBE(f.kind === 'gap' ? f.to : 0, 10 + n);
  body.copy(out, HEAD + n);
  return out;
}

const seqOk = (x: number) => Number.isSafeInteger(x) && x >= 0;

/** Parses one binary frame; throws OutputFrameError with a reason. The data is a view, not a copy. */
export function decodeOutput(buf: Buffer): OutputFrame {
  if (buf.length < HEAD + 1) throw new OutputFrameError('binary frame shorter than its header');
  const kind = KIND_NAMES[buf[0]];
  if (!kind) throw new OutputFrameError('binary frame of an unknown kind');
  const n = buf[1];
  if (buf.length < HEAD + n) throw new OutputFrameError('binary frame shorter than its header');
  const follow = buf.toString('latin1', 2, 2 + n);
  if (!FOLLOW_RE.test(follow)) throw new OutputFrameError('binary frame with a malformed follower id');
  const a = buf.readDoubleBE(2 + n);
  const b = buf.readDoubleBE(10 + n);
  if (!seqOk(a) || !seqOk(b)) throw new OutputFrameError('binary frame with a malformed sequence number');
  const body = buf.subarray(HEAD + n);
  if (kind === 'stdout' || kind === 'stderr') return { kind, follow, seq: a, data: body };
  if (kind === 'gap') {
    if (a < 1 || b < a) throw new OutputFrameError('gap frame with an empty range');
    return { kind, follow, from: a, to: b };
  }
  let end: unknown;
  try {
    end = JSON.parse(body.toString('utf8'));
  } catch {
    throw new OutputFrameError('end frame body is not JSON');
  }
  if (!END_CHECK.Check(end)) throw new OutputFrameError('end frame body is not a process end');
  return { kind, follow, end };
}
