// Fuzzing host stream frames: 1000 generated texts to the frame parser, 500 generated first
// frames on fresh sockets (before hello) and 500 generated frames from a joined host (wrong
// types, unknown kinds, stray acks and results, odd payloads, oversized, binary, invalid UTF-8),
// including process output frames (binary: valid ones for followers nobody attached, and ones with
// a bad kind, follower id, sequence number or end body).
// Every refusal closes with 1008 and nothing else; no host is recorded and no join token used by
// a refused hello; a joined host's stray frames create no command; the server keeps answering.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { WebSocket } from 'ws';
import { FrameError, parseFrame } from '../../protocol/frames.ts';
import { parseHello } from '../../protocol/hello.ts';
import { decodeOutput, encodeOutput, type OutputFrame, OutputFrameError } from '../../protocol/processes.ts';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { closeOf, dial, helloAs, mangledOutput, outputFrame, wire } from './support/frame-gen.ts';
import { runs } from './support/fuzz.ts';
import { rowCounts } from './support/state.ts';

describe('hostile stream frames', () => {
  test('the frame parser: a frame or a FrameError, for 1000 generated texts', () => {
    fc.assert(
      fc.property(wire, (w) => {
        try {
          const f = parseFrame(String(w.data));
          if (f.type === 'hello') parseHello(f);
        } catch (err) {
          assert.ok(err instanceof FrameError, String(err));
        }
      }),
      runs(1000),
    );
  });

  test('the output frame decoder: round trips what a sidecar sends, OutputFrameError for the rest', () => {
    fc.assert(
      fc.property(outputFrame, (f) => {
        // Plain objects on both sides (fast-check's records are not).
        const plain = (x: OutputFrame) => ({ ...x, ...(x.kind === 'end' ? { end: { ...x.end } } : {}) });
        assert.deepEqual(plain(decodeOutput(encodeOutput(f))), plain(f));
      }),
      runs(1000),
    );
    fc.assert(
      fc.property(
        fc.oneof(
          mangledOutput,
          fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
        ),
        (b) => {
          try {
            decodeOutput(b);
          } catch (err) {
            assert.ok(err instanceof OutputFrameError, String(err));
          }
        },
      ),
      runs(1000),
    );
  });

  describe('on a real control plane', () => {
    let s: TestServer;
    let token: string;
    before(async () => {
      s = await startTestServer('sqlite', {}, { limits: NO_RATE_LIMITS });
      token = (await s.req('POST', '/v1/join-tokens', { body: {} })).body.token;
    });
    after(() => s.close());

    test('500 first frames before hello: each closes with 1008, no host, the token unused', {
      timeout: 120_000,
    }, async () => {
      const before = await rowCounts(s);
      const codes = new Map<number, number>();
      await fc.assert(
        fc.asyncProperty(wire, async (w) => {
          const ws = await dial(s.url);
          const closed = closeOf(ws);
          ws.send(w.data, { binary: w.binary });
          const code = await closed;
          codes.set(code, (codes.get(code) ?? 0) + 1);
          assert.equal(code, 1008);
        }),
        runs(500),
      );
      assert.deepEqual(await rowCounts(s), before, JSON.stringify([...codes]));
      const sc = await new FakeSidecar(s.url).connect(token);
      assert.match(sc.hostId, /^host_/, 'the join token is still usable');
      await sc.close();
    });

    test('500 frames from a joined host: refusals are 1008, no command appears, the server answers', {
      timeout: 120_000,
    }, async () => {
      const sc = await new FakeSidecar(s.url).connect(
        (await s.req('POST', '/v1/join-tokens', { body: {} })).body.token,
      );
      await sc.close();
      // Each reconnect's hello asks the host for its report (host.report): those are expected.
      const counts = async () => {
        const { events: _e, hosts: _h, commands: _c, ...rest } = await rowCounts(s);
        const other = await s.server.ctx.db.get<{ n: number }>(
          "SELECT COUNT(*) AS n FROM commands WHERE kind <> 'host.report'",
        );
        return { ...rest, commands: Number(other?.n) };
      };
      const before = await counts();
      let ws: WebSocket | null = null;
      const refusals = new Map<number, number>();
      const connect = async () => {
        const c = await helloAs(s.url, sc.hostId, sc.secret);
        c.on('close', (code) => refusals.set(code, (refusals.get(code) ?? 0) + 1));
        return c;
      };
      await fc.assert(
        fc.asyncProperty(wire, async (w) => {
          if (!ws || ws.readyState !== WebSocket.OPEN) ws = await connect();
          ws.send(w.data, { binary: w.binary });
          // A heartbeat round: the server handled the frame before this one (or closed).
          await new Promise((r) => setTimeout(r, 2));
        }),
        runs(500),
      );
      // Every stream this test opened has closed (the last by us): each close code is recorded.
      const last = ws as WebSocket | null;
      if (last && last.readyState !== WebSocket.CLOSED) {
        const closed = new Promise((r) => last.once('close', r));
        last.close(1000);
        await withTimeout(closed, 10_000, () => new Error('the last stream did not close'));
      }
      for (const code of refusals.keys())
        assert.ok(code === 1008 || code === 1000 || code === 1005, `closed with ${code}`);
      assert.ok((refusals.get(1008) ?? 0) > 0, 'some frames were refused');
      assert.deepEqual(await counts(), before);
      assert.equal((await fetch(`${s.url}/health`)).status, 200);
      assert.equal((await s.req('GET', `/v1/events?subject=host:${sc.hostId}`)).status, 200);
      assert.equal((await s.req('GET', '/v1/hosts')).status, 200);
    });
  });
});
