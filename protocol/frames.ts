// Frames of the host stream (spec: "Host stream protocol"). Every message is one JSON text frame.
import { type Static, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { isoNow } from './time.ts';

export const FRAME_TYPES = ['hello', 'command', 'ack', 'progress', 'result', 'event', 'heartbeat'] as const;
export type FrameType = (typeof FRAME_TYPES)[number];

export const MAX_FRAME_BYTES = 16 * 1024 * 1024;
export const HEARTBEAT_INTERVAL_MS = 10_000;
export const HEARTBEAT_GRACE_MS = 60_000;
/** WebSocket close code for every refusal; a sidecar treats it as fatal. */
export const POLICY_VIOLATION = 1008;
export const STREAM_PATH = '/v1/hosts/stream';

const OptText = Type.Optional(Type.Union([Type.String(), Type.Null()]));

/**
 * Why a command failed, beside its `error` text: `timeout` (not answered within its bound),
 * `cancelled` (the caller gave up, e.g. its phase was cancelled), `host_gone` (the host's stream
 * dropped or it is not connected), `host_error` (the host ran it and it failed; also any failed
 * result that names no type), `malformed` (the payload or the result broke its schema). A sidecar
 * sends it on a failed `result` as `error_type`; the control plane's HTTP answer follows it.
 */
export const COMMAND_FAILURE_TYPES = [
  'timeout',
  'cancelled',
  'host_gone',
  'host_error',
  'malformed',
] as const;
export const CommandFailureType = Type.Union(COMMAND_FAILURE_TYPES.map((t) => Type.Literal(t)));
export type CommandFailureType = Static<typeof CommandFailureType>;

/** The frame envelope; property order is the order parseFrame reports a bad field in. */
export const FrameSchema = Type.Object({
  type: Type.Union(FRAME_TYPES.map((t) => Type.Literal(t))),
  host_id: OptText,
  command_id: OptText,
  kind: OptText,
  env_id: OptText,
  error: OptText,
  error_type: Type.Optional(CommandFailureType),
  message: OptText,
  sent_at: OptText,
  ok: Type.Optional(Type.Boolean()),
  payload: Type.Optional(Type.Unknown()),
});
export type Frame = Static<typeof FrameSchema>;
const FRAME_CHECK = TypeCompiler.Compile(FrameSchema);
const FRAME_FIELDS = Object.keys(FrameSchema.properties);

export class FrameError extends Error {}

/** Parses and checks one frame; throws FrameError with a reason a peer can act on. */
export function parseFrame(data: string): Frame {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new FrameError('frame is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new FrameError('frame must be a JSON object');
  }
  const f = value as Record<string, unknown>;
  if (!FRAME_CHECK.Check(f)) {
    const rank = (path: string) => FRAME_FIELDS.indexOf(path.split('/')[1] ?? '');
    const error = [...FRAME_CHECK.Errors(f)].sort((a, b) => rank(a.path) - rank(b.path))[0];
    const key = error?.path.split('/')[1] ?? 'type';
    if (key === 'type') throw new FrameError(`frame type must be one of ${FRAME_TYPES.join(', ')}`);
    if (key === 'ok') throw new FrameError('frame field ok must be a boolean');
    if (key === 'error_type')
      throw new FrameError(`frame field error_type must be one of ${COMMAND_FAILURE_TYPES.join(', ')}`);
    throw new FrameError(`frame field ${key} must be a string`);
  }
  const needsCommandId =
    f.type === 'command' || f.type === 'ack' || f.type === 'progress' || f.type === 'result';
  if (needsCommandId && (typeof f.command_id !== 'string' || f.command_id === '')) {
    throw new FrameError(`${f.type} frame needs a command_id`);
  }
  if (f.type === 'result' && typeof f.ok !== 'boolean') throw new FrameError('result frame needs ok');
  if (f.type === 'command' && typeof f.kind !== 'string') throw new FrameError('command frame needs a kind');
  return f;
}

export function frame(type: FrameType, fields: Omit<Frame, 'type' | 'sent_at'> = {}): Frame {
  return { type, ...fields, sent_at: isoNow() };
}
