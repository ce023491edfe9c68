// Spec "Limits" and "Errors": a file archive over 32 MiB is a 413, and the client always receives
// it. The server answers, then reads and discards the rest of the body (bounded) instead of
// closing on a client that is still writing, which resets the connection and can lose the answer.
// Only the HTTP layer is exercised here (the environment need not exist: the limit is checked
// before the route runs), so one storage dialect is enough.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { watchAlive } from '../support/alive.ts';
import { MiB, rawPut } from '../support/raw-put.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const OVERSIZED = 32 * MiB + 64 * 1024;
const PATH = '/v1/envs/env_none/files?service=app&path=/data';
const TOO_LARGE = JSON.stringify({ error: 'request body too large' });

/** Short enough that a test can let it pass; far longer than any drain here takes. */
const DRAIN_MS = 5_000;
let s: TestServer;
before(async () => {
  s = await startTestServer('sqlite', {}, { limits: { drainMaxMs: DRAIN_MS } });
});
after(() => s.close());

/** A PUT of `size` bytes over a bare socket (see rawPut), with the team's key. */
const rawUpload = (size: number, chunked: boolean, next?: () => Promise<void>) =>
  rawPut(s.url, PATH, size, { key: s.key, chunked, next });

/**
 * Runs 20 uploads from a plain Node http client in its own process, as a user's would: in this
 * one, the server's event loop would order the client's reads and hide the reset.
 */
async function twentyUploads(key: string, size: number) {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['test/support/upload-client.ts', s.url + PATH, key, String(size), '20'],
    { maxBuffer: 4 * MiB },
  );
  const outcomes = stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(outcomes.length, 20);
  return outcomes as { status: number | null; body: string; errorBeforeAnswer: boolean }[];
}

test('20 oversized uploads from a plain Node http client: 20 answers of 413', async () => {
  const outcomes = await twentyUploads(s.key, OVERSIZED);
  const bad = outcomes.filter((o) => o.status !== 413 || o.body !== TOO_LARGE || o.errorBeforeAnswer);
  assert.deepEqual(bad, [], `${bad.length} of 20 uploads did not read the 413 first`);
});

test('20 large uploads with a bad key: 20 answers of 401, refused before the body is read', async () => {
  const outcomes = await twentyUploads('dak_not-a-real-key-0000000000', OVERSIZED);
  const bad = outcomes.filter((o) => o.status !== 401 || o.errorBeforeAnswer);
  assert.deepEqual(bad, [], `${bad.length} of 20 uploads did not read the 401 first`);
  assert.match(outcomes[0].body, /invalid API key/);
});

test('the server reads the rest of a refused body instead of resetting the writer', async () => {
  for (const chunked of [false, true]) {
    const o = await rawUpload(OVERSIZED, chunked);
    assert.equal(o.error, null, `chunked=${chunked}: ${JSON.stringify(o)}`);
    assert.equal(o.written, OVERSIZED);
    assert.equal(o.status, 413);
    assert.equal(o.body.endsWith(TOO_LARGE), true, o.body);
  }
  const kept = await rawUpload(OVERSIZED, false, async () => {});
  assert.equal(kept.error, null, JSON.stringify(kept));
  assert.deepEqual(kept.statuses, [413, 200], 'the drained connection answers the next request');
});

test('the drain is bounded: a body far over the limit is answered, then cut off', async () => {
  const alive = watchAlive();
  const o = await rawUpload(512 * MiB, false);
  assert.equal(o.status, 413, JSON.stringify(o));
  assert.ok(o.written < 512 * MiB, `the server stopped reading after its bound (${o.written} written)`);
  await alive.assertAliveAfter(s.url, DRAIN_MS);
});

test('refusals one after another on one connection are each answered and drained', async () => {
  const url = new URL(s.url);
  const server = s.server.app.server;
  const accepted = new Promise<import('node:net').Socket>((r) => server.once('connection', r));
  const sock = connect(Number(url.port), url.hostname);
  const peer = await accepted;
  let text = '';
  sock.on('data', (c) => {
    text += c.toString();
  });
  const answers = () => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  const body = Buffer.alloc(MiB, 0x61);
  for (let i = 1; i <= 12; i++) {
    sock.write(
      `PUT ${PATH} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer dak_bad\r\n` +
        `content-type: application/x-tar\r\ncontent-length: ${body.length}\r\n\r\n`,
    );
    sock.write(body);
    while (answers().length < i) await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual(answers(), Array(12).fill(401));
  assert.ok(peer.listenerCount('close') < 6, `${peer.listenerCount('close')} close listeners on the socket`);
  sock.end();
});
