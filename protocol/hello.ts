// The hello frame's payload (spec "Host stream protocol"): the first frame of every stream, with a
// join token (first time) or the host's id and secret, and the host's capabilities. One schema,
// compiled once; the control plane checks every hello with it before it reads a field.
import { type Static, type TSchema, type TString, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { type Frame, FrameError, frame } from './frames.ts';

/**
 * Capabilities are stored and listed as sent: a small, shallow object of plain text (a huge or deep
 * one would cost every listing; Postgres refuses a NUL in text).
 */
export const MAX_CAPABILITIES_BYTES = 16 * 1024;
export const MAX_CAPABILITIES_DEPTH = 4;

/** Text with no NUL anywhere (Postgres refuses NUL in TEXT and in JSON text it reads back). */
const NO_NUL = '^[^\\u0000]*$';
const Plain = Type.String({ pattern: NO_NUL });
const AnyText = Type.String({ pattern: '^[\\s\\S]*$' });

/**
 * A JSON value at `depth` below the capabilities object: nothing is nested below
 * MAX_CAPABILITIES_DEPTH, and every string and key is `text`.
 */
function capabilityValue(depth: number, text: TString): TSchema {
  const scalars = [text, Type.Number(), Type.Boolean(), Type.Null()];
  if (depth === MAX_CAPABILITIES_DEPTH) {
    const empty = [
      Type.Array(Type.Unknown(), { maxItems: 0 }),
      Type.Object({}, { additionalProperties: false }),
    ];
    return Type.Union([...scalars, ...empty]);
  }
  const inner = capabilityValue(depth + 1, text);
  return Type.Union([
    ...scalars,
    Type.Array(inner),
    Type.Record(text, inner, { additionalProperties: false }),
  ]);
}

const capabilitiesOf = (text: TString) =>
  Type.Record(text, capabilityValue(1, text), { additionalProperties: false });

/**
 * The capabilities a host sends, stored as sent. A sidecar sends its `Capabilities` record
 * (results.ts), an older one fewer fields, so only the limits are checked here.
 */
export const HelloCapabilitiesSchema = capabilitiesOf(Plain);
export type HelloCapabilities = Static<typeof HelloCapabilitiesSchema>;

export const HelloPayloadSchema = Type.Object({
  /** Empty or absent on the first hello, which carries a join token. */
  host_id: Type.Optional(Type.Union([Type.String({ maxLength: 128, pattern: NO_NUL }), Type.Null()])),
  /** The join token, or the host secret when host_id is set. */
  token: Type.String({ minLength: 1, maxLength: 512, pattern: NO_NUL }),
  capabilities: Type.Optional(Type.Union([HelloCapabilitiesSchema, Type.Null()])),
});
type HelloWire = Static<typeof HelloPayloadSchema>;
/** A checked hello, with absent (or null) host_id and capabilities filled in ('' and {}). */
export type HelloPayload = { [K in keyof HelloWire]-?: NonNullable<HelloWire[K]> };

/**
 * The control plane's answer to a hello: the host's id, with its secret only when the hello joined
 * with a token (the host keeps it for every later hello).
 */
export const HelloReplySchema = Type.Object({
  host_id: Type.String({ minLength: 1, maxLength: 128 }),
  secret: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
});
export type HelloReply = Static<typeof HelloReplySchema>;

const HELLO = TypeCompiler.Compile(HelloPayloadSchema);
const REPLY = TypeCompiler.Compile(HelloReplySchema);
const PAYLOAD = TypeCompiler.Compile(Type.Object({}));
const CAPS_OBJECT = TypeCompiler.Compile(Type.Record(AnyText, Type.Unknown()));
const CAPS_SHALLOW = TypeCompiler.Compile(capabilitiesOf(AnyText));
const CAPS = TypeCompiler.Compile(HelloCapabilitiesSchema);

/** Reads the hello frame; throws FrameError with the reason the stream is refused for. */
export function parseHello(frame: Frame): HelloPayload {
  const p = frame.payload;
  if (frame.type !== 'hello' || !PAYLOAD.Check(p))
    throw new FrameError('first frame must be hello with a payload');
  if (!HELLO.Check(p)) throw new FrameError(helloProblem(p));
  const capabilities = p.capabilities ?? {};
  checkCapabilities(capabilities);
  return { host_id: p.host_id ?? '', token: p.token, capabilities };
}

/** The control plane's hello frame for a host: its secret only right after it joined. */
export function helloReply(hostId: string, secret?: string): Frame {
  const payload: HelloReply = secret === undefined ? { host_id: hostId } : { host_id: hostId, secret };
  return frame('hello', { host_id: hostId, payload });
}

/** The hello reply's fields, or none when the payload is not a reply (the host then keeps its identity). */
export function parseHelloReply(payload: unknown): Partial<HelloReply> {
  return REPLY.Check(payload) ? payload : {};
}

/** The first problem of a hello payload, in the order a peer fixes them. */
function helloProblem(p: Record<string, unknown>): string {
  const field = (name: string) => [...HELLO.Errors(p)].some((e) => e.path.split('/')[1] === name);
  if (p.host_id != null && typeof p.host_id !== 'string') return 'hello host_id must be a string';
  if (typeof p.token !== 'string' || p.token === '') return 'hello needs a token';
  if (field('host_id') || field('token')) return 'hello host_id or token is malformed';
  return capabilitiesProblem(p.capabilities ?? {});
}

/** Throws FrameError when `caps` (a hello's or a host.report's) is not an object, too deep or too large, or holds a NUL. */
export function checkCapabilities(caps: unknown): void {
  const problem = capabilitiesProblem(caps);
  if (problem) throw new FrameError(problem);
}

function capabilitiesProblem(caps: unknown): string {
  if (!CAPS_OBJECT.Check(caps)) return 'hello capabilities must be an object';
  if (!CAPS_SHALLOW.Check(caps)) {
    return `hello capabilities are nested deeper than ${MAX_CAPABILITIES_DEPTH} levels`;
  }
  if (!CAPS.Check(caps)) return 'hello capabilities contain a NUL character';
  if (Buffer.byteLength(JSON.stringify(caps)) > MAX_CAPABILITIES_BYTES) {
    return `hello capabilities are larger than ${MAX_CAPABILITIES_BYTES} bytes`;
  }
  return '';
}
