// Answer-then-drain (server/http/drain.ts) with its bounds made small enough to pass within a
// test: the control plane answers a refused body, reads the rest within its bounds, cuts what
// goes past them, honours a client's `Connection: close` once the body has been read, and is
// still alive (it answers) after every bound has passed.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';
import { TooLarge } from '../../server/errors.ts';
import { createHttpApp } from '../../server/http/app.ts';
import { httpLimits } from '../../server/http/limits.ts';
import { watchAlive } from '../support/alive.ts';
import { MiB, rawPut } from '../support/raw-put.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const DRAIN_MS = 300;
const FILES = '/v1/envs/env_none/files?service=app&path=/data';

let s: TestServer;
/** With the default bounds, which a body of tens of MiB on loopback stays within even under load. */
let plain: TestServer;
before(async () => {
  s = await startTestServer('sqlite', {}, { limits: { drainMaxMs: DRAIN_MS } });
  plain = await startTestServer('sqlite');
});
after(async () => {
  await s.close();
  await plain.close();
});

test('an upload streamed past 512 MiB with a valid key gets its 413, and the server outlives the drain bound', async () => {
  const alive = watchAlive();
  const o = await rawPut(s.url, '/v1/uploads', 600 * MiB, { key: s.key });
  assert.equal(o.status, 413, JSON.stringify(o));
  await alive.assertAliveAfter(s.url, DRAIN_MS);
});

test('a handler that destroyed its body stream past a limit of its own: the 413 goes out, and the server outlives the drain bound', async () => {
  // The state an upload route left when it gave up on its body: the request without its socket.
  const app = await createHttpApp({
    logger: false,
    version: 'test',
    verbose: false,
    limits: httpLimits({ drainMaxMs: DRAIN_MS }),
  });
  app.get('/health', async () => ({ status: 'ok' }));
  app.register(async (scope) => {
    scope.addContentTypeParser('application/x-tar', (_req, payload, done) => done(null, payload));
    scope.put('/stream', { bodyLimit: 1024 * MiB }, async (req) => {
      let n = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _enc, done) {
          n += chunk.length;
          done(n > 4 * MiB ? new TooLarge('over 4 MiB') : null);
        },
      });
      // As the upload route streamed to disk: the pipeline destroys the body when it fails.
      await pipeline(
        req.body as NodeJS.ReadableStream,
        meter,
        new Writable({ write: (_c, _e, done) => done() }),
      );
      return {};
    });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const alive = watchAlive();
    const o = await rawPut(url, '/stream', 16 * MiB);
    assert.equal(o.status, 413, JSON.stringify(o));
    await alive.assertAliveAfter(url, DRAIN_MS);
  } finally {
    await app.close();
  }
});

test('a refused body that stops arriving is cut at the drain bound, and the server still answers', async () => {
  const alive = watchAlive();
  const u = new URL(s.url);
  const sock = connect(Number(u.port), u.hostname);
  let text = '';
  sock.on('data', (c) => {
    text += c.toString();
  });
  sock.on('error', () => {});
  const closed = new Promise((r) => sock.once('close', r));
  sock.write(
    `PUT ${FILES} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer dak_bad\r\n` +
      `content-type: application/x-tar\r\ncontent-length: ${8 * MiB}\r\n\r\n`,
  );
  sock.write(Buffer.alloc(MiB, 0x61));
  // Never sends the other 7 MiB: only the drain's time bound ends this connection.
  await closed;
  assert.match(text, /^HTTP\/1\.1 401/);
  await alive.assertAliveAfter(s.url, DRAIN_MS);
});

test("a refused chunked body is read to its end, then the client's Connection: close is honoured", async () => {
  const server = plain.server.app.server;
  const peer = new Promise<Socket>((r) => server.once('connection', r));
  const request = new Promise<IncomingMessage>((r) => server.once('request', r));
  let bodyEnded: Promise<void> = Promise.resolve();
  void request.then((req) => {
    bodyEnded = new Promise((r) => req.once('end', () => setImmediate(r)));
  });
  const o = await rawPut(plain.url, FILES, 60 * MiB, {
    key: plain.key,
    chunked: true,
    headers: ['connection: close'],
    next: async () => {
      await request;
      await bodyEnded;
      assert.equal((await peer).writableEnded, true, 'the server closes its end once the body was read');
    },
  });
  assert.equal(o.status, 413, JSON.stringify(o));
  assert.deepEqual(o.statuses, [413], 'no further request is answered on a connection the client closed');
  assert.equal(o.written, 60 * MiB);
  assert.equal((await fetch(`${plain.url}/health`)).status, 200);
});
