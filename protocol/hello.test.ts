// The hello payload is one TypeBox schema (protocol/hello.ts); a hello it refuses gets the reason
// the stream is closed with (spec "Host stream protocol": capabilities small,
// shallow and free of NUL).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FrameError, frame } from './frames.ts';
import {
  checkCapabilities,
  HelloPayloadSchema,
  helloReply,
  MAX_CAPABILITIES_BYTES,
  parseHello,
  parseHelloReply,
} from './hello.ts';

const refusal = (payload: unknown, type: 'hello' | 'heartbeat' = 'hello'): string => {
  try {
    parseHello(frame(type, { payload }));
  } catch (err) {
    assert.ok(err instanceof FrameError);
    return err.message;
  }
  return 'accepted';
};
const nested = (levels: number): Record<string, unknown> => {
  let v: unknown = 1;
  for (let i = 0; i < levels; i++) v = { k: v };
  return v as Record<string, unknown>;
};

describe('hello payload', () => {
  test('a first hello (join token) and a known host (id and secret) are read, absent fields filled in', () => {
    assert.deepEqual(parseHello(frame('hello', { payload: { token: 'jt_1' } })), {
      host_id: '',
      token: 'jt_1',
      capabilities: {},
    });
    const caps = { hostname: 'h', storage: 'dir', cpus: 2, tags: ['a', 'b'], gpu: null };
    assert.deepEqual(
      parseHello(frame('hello', { payload: { host_id: 'host_1', token: 'dhs_1', capabilities: caps } })),
      { host_id: 'host_1', token: 'dhs_1', capabilities: caps },
    );
    assert.deepEqual(
      parseHello(frame('hello', { payload: { host_id: null, token: 't', capabilities: null } })),
      {
        host_id: '',
        token: 't',
        capabilities: {},
      },
    );
  });

  test('each refusal names what is wrong, in the order a peer fixes it', () => {
    const cases: Array<[unknown, string]> = [
      [{ token: 't' }, 'accepted'],
      [null, 'first frame must be hello with a payload'],
      ['hello', 'first frame must be hello with a payload'],
      [{ host_id: 7, token: 't' }, 'hello host_id must be a string'],
      [{ host_id: 'h' }, 'hello needs a token'],
      [{ token: '' }, 'hello needs a token'],
      [{ host_id: 'h'.repeat(129) }, 'hello needs a token'],
      [{ host_id: 'h'.repeat(129), token: 't' }, 'hello host_id or token is malformed'],
      [{ token: 't'.repeat(513) }, 'hello host_id or token is malformed'],
      [{ host_id: 'h\0', token: 't' }, 'hello host_id or token is malformed'],
      [{ token: 't', capabilities: 'x' }, 'hello capabilities must be an object'],
      [{ token: 't', capabilities: [] }, 'hello capabilities must be an object'],
      [{ token: 't', capabilities: nested(4) }, 'accepted'],
      [{ token: 't', capabilities: nested(5) }, 'hello capabilities are nested deeper than 4 levels'],
      [{ token: 't', capabilities: { a: [[[[]]]] } }, 'accepted'],
      [{ token: 't', capabilities: { a: [[[[1]]]] } }, 'hello capabilities are nested deeper than 4 levels'],
      [{ token: 't', capabilities: { hostname: 'a\0b' } }, 'hello capabilities contain a NUL character'],
      [{ token: 't', capabilities: { a: { 'k\0': 1 } } }, 'hello capabilities contain a NUL character'],
      [{ token: 't', capabilities: { 'line\nbreak': 'a\nb' } }, 'accepted'],
      [
        { token: 't', capabilities: { blob: 'x'.repeat(MAX_CAPABILITIES_BYTES) } },
        'hello capabilities are larger than 16384 bytes',
      ],
    ];
    for (const [payload, reason] of cases)
      assert.equal(refusal(payload), reason, JSON.stringify(payload)?.slice(0, 80));
    assert.equal(refusal({ token: 't' }, 'heartbeat'), 'first frame must be hello with a payload');
  });

  test("a host.report's capabilities get the same limits", () => {
    assert.doesNotThrow(() => checkCapabilities({ hostname: 'h', disk_gb: 3 }));
    assert.throws(() => checkCapabilities(nested(6)), /nested deeper than 4 levels/);
    assert.throws(() => checkCapabilities({ os: 'linux\0' }), /NUL/);
  });

  test('the schema is the wire record: its fields are the ones the sidecar sends', () => {
    assert.deepEqual(Object.keys(HelloPayloadSchema.properties), ['host_id', 'token', 'capabilities']);
    assert.deepEqual(HelloPayloadSchema.required, ['token']);
  });

  test('the reply: the host id, and the secret only after a join; a malformed reply is no identity', () => {
    assert.deepEqual(helloReply('host_1', 'hs_x').payload, { host_id: 'host_1', secret: 'hs_x' });
    assert.deepEqual(helloReply('host_1').payload, { host_id: 'host_1' });
    assert.deepEqual(parseHelloReply(helloReply('host_1', 'hs_x').payload), {
      host_id: 'host_1',
      secret: 'hs_x',
    });
    for (const bad of [
      undefined,
      null,
      'x',
      {},
      { host_id: 5 },
      { host_id: '' },
      { host_id: 'h', secret: 1 },
    ])
      assert.deepEqual(parseHelloReply(bad), {}, JSON.stringify(bad));
  });
});
