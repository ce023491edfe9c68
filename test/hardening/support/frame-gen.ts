// Hostile host-stream frames shared by the stream fuzz suite and the soak benchmark: JSON frames
// with wrong types, unknown kinds, stray acks and results and odd payloads, arbitrary JSON and
// text, binary and invalid UTF-8 messages, and oversized frames; and a raw dial of the stream.
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { FRAME_TYPES, frame, STREAM_PATH } from '../../../protocol/frames.ts';
import { encodeOutput, type OutputFrame } from '../../../protocol/processes.ts';
import { DEFAULT_CAPS } from '../../support/fake-sidecar.ts';

const payload = fc.jsonValue({ maxDepth: 4 });
const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 40 }));
const fields = fc.record(
  {
    type: fc.oneof(fc.constantFrom(...FRAME_TYPES, 'nonsense', '', 'HELLO'), fc.integer(), fc.constant(null)),
    host_id: fc.oneof(text, fc.integer()),
    command_id: fc.oneof(fc.constantFrom('cmd_unknown', ''), text, fc.integer()),
    kind: fc.oneof(
      fc.constantFrom(
        'env.exec',
        'host.report',
        'env.create',
        'bogus.kind',
        'egress.set',
        'proc.start',
        'proc.attach',
        'proc.input',
        'proc.signal',
        'proc.resize',
        'fs.read',
        'fs.write',
        'fs.watch',
      ),
      text,
    ),
    env_id: text,
    ok: fc.oneof(fc.boolean(), text),
    error: fc.oneof(text, payload),
    message: fc.oneof(text, fc.integer()),
    payload,
  },
  { requiredKeys: [] },
);

/** Process output frames as a sidecar sends them (binary), valid by construction. */
const follow = fc.stringMatching(/^[A-Za-z0-9_-]{1,64}$/);
const seq = fc.integer({ min: 1, max: 2 ** 40 });
export const outputFrame: fc.Arbitrary<OutputFrame> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('stdout' as const, 'stderr' as const),
    follow,
    seq,
    data: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
  }),
  fc
    .tuple(follow, seq, fc.nat(1000))
    .map(([f, from, n]) => ({ kind: 'gap' as const, follow: f, from, to: from + n })),
  fc.record({
    kind: fc.constant('end' as const),
    follow,
    end: fc.record(
      {
        exit_code: fc.oneof(fc.integer({ min: -1, max: 255 }), fc.constant(null)),
        signal: fc.constantFrom('KILL', 'TERM'),
        reason: fc.string({ maxLength: 100 }),
      },
      { requiredKeys: ['exit_code'] },
    ),
  }),
);
/** Output frames with one byte of the header or body changed, or cut short. */
export const mangledOutput = fc
  .tuple(outputFrame, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.boolean())
  .map(([f, at, byte, cut]) => {
    const b = encodeOutput(f);
    if (cut) return b.subarray(0, at % b.length);
    b[at % Math.min(b.length, 40)] = byte;
    return b;
  });

/** A frame as sent on the wire: JSON text, or bytes that are not a frame at all. */
export type Wire = { data: string | Buffer; binary: boolean };
export const wire: fc.Arbitrary<Wire> = fc.oneof(
  { weight: 6, arbitrary: fields.map((f) => ({ data: JSON.stringify(f), binary: false })) },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => ({ data: JSON.stringify(v) ?? 'null', binary: false })) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((s) => ({ data: s, binary: false })) },
  {
    weight: 1,
    arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ data: Buffer.from(b), binary: true })),
  },
  { weight: 1, arbitrary: fc.constant({ data: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), binary: false }) },
  { weight: 2, arbitrary: outputFrame.map((f) => ({ data: encodeOutput(f), binary: true })) },
  { weight: 2, arbitrary: mangledOutput.map((b) => ({ data: b, binary: true })) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 64 * 1024, max: 2 * 1024 * 1024 }).map((n) => ({
      data: JSON.stringify(frame('event', { kind: 'big', payload: 'x'.repeat(n) })),
      binary: false,
    })),
  },
);

export function dial(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + STREAM_PATH, { perMessageDeflate: false });
  ws.on('error', () => {});
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}
export const closeOf = (ws: WebSocket) =>
  new Promise<number>((resolve) => {
    if (ws.readyState === WebSocket.CLOSED) resolve(-1);
    ws.once('close', (code) => resolve(code));
  });

/** A stream of a joined host (its id and secret), open once the server has answered its hello. */
export async function helloAs(url: string, hostId: string, secret: string): Promise<WebSocket> {
  const c = await dial(url);
  c.send(
    JSON.stringify(
      frame('hello', {
        host_id: hostId,
        payload: { host_id: hostId, token: secret, capabilities: DEFAULT_CAPS },
      }),
    ),
  );
  await new Promise((resolve) => c.once('message', resolve));
  return c;
}
