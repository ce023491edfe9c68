// What a client without credentials (or with many) can make the server hold.
// Timeouts close connections that hold part of a request, the connection count is capped, routes
// that need no credential take only small bodies, JSON depth is bounded before parsing, and
// request rates are limited with 429 and Retry-After; a user approving device codes is locked
// out after a few unknown codes.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_LIMITS } from '../../server/http/limits.ts';
import { watchAlive } from '../support/alive.ts';
import { assertError, signIn } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { rowCounts } from './support/state.ts';

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(port), hostname, () => resolve(sock));
    sock.on('error', reject);
  });
}

/** Resolves with what the server wrote before it closed the socket. */
function closedBy(sock: Socket): Promise<string> {
  let got = '';
  sock.on('data', (d) => {
    got += d.toString('latin1');
  });
  return new Promise((resolve) => sock.on('close', () => resolve(got)));
}

describe('timeouts and a connection cap (defaults)', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite');
  });
  after(() => s.close());

  test('the real server carries request, header and idle timeouts and a connection cap', () => {
    const srv = s.server.app.server;
    // Node's own bound is the backstop at the longest (an upload's); each route's body is bounded
    // by server/http/body-timeouts.ts (test/api/upload-bounds.test.ts).
    assert.equal(srv.requestTimeout, DEFAULT_LIMITS.uploadTimeoutMs);
    assert.ok(DEFAULT_LIMITS.requestTimeoutMs > 0 && DEFAULT_LIMITS.requestTimeoutMs <= 300_000);
    assert.ok(srv.requestTimeout > 0 && srv.requestTimeout <= 6 * 3600_000);
    assert.ok(srv.headersTimeout > 0 && srv.headersTimeout <= 60_000);
    assert.ok(srv.keepAliveTimeout > 0 && srv.keepAliveTimeout <= 60_000);
    assert.ok(srv.maxConnections > 0 && srv.maxConnections <= 16_384);
  });

  test('unauthenticated routes take small bodies only (413), before any parsing', async () => {
    const big = JSON.stringify({ device_code: 'x'.repeat(64 * 1024) });
    for (const path of ['/v1/device/code', '/v1/device/token']) {
      const r = await s.req('POST', path, {
        raw: big,
        token: false,
        headers: { 'content-type': 'application/json' },
      });
      assertError(r, 413);
    }
  });

  test('deep JSON is refused before it is parsed', async () => {
    const deep = `${'['.repeat(500_000)}${']'.repeat(500_000)}`;
    const before = await rowCounts(s);
    for (const [path, token] of [
      ['/v1/projects', undefined],
      ['/v1/device/token', false],
    ] as const) {
      const r = await s.req('POST', path, {
        raw: deep,
        token,
        headers: { 'content-type': 'application/json' },
      });
      assert.ok(r.status === 400 || r.status === 413, `${path}: ${r.status}`);
    }
    const r = await s.req('POST', '/v1/projects', {
      raw: `{"name":${'['.repeat(100)}${']'.repeat(100)}}`,
      headers: { 'content-type': 'application/json' },
    });
    assertError(r, 400, 'nested deeper than 64 levels');
    assert.deepEqual(await rowCounts(s), before);
  });
});

describe('held connections are closed', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(
      'sqlite',
      {},
      { limits: { requestTimeoutMs: 1500, headersTimeoutMs: 1000, maxConnections: 8 } },
    );
  });
  after(() => s.close());

  test('a declared body that never arrives is cut at the request timeout', { timeout: 30_000 }, async () => {
    const alive = watchAlive();
    const sock = await open(s.url);
    const done = closedBy(sock);
    sock.write(
      `POST /v1/device/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n{"dev`,
    );
    const answer = await done;
    assert.ok(answer === '' || answer.startsWith('HTTP/1.1 408'), answer.slice(0, 80));
    await alive.assertAliveAfter(s.url, 0);
  });

  test('half-sent headers are cut at the header timeout', { timeout: 30_000 }, async () => {
    const alive = watchAlive();
    const sock = await open(s.url);
    const done = closedBy(sock);
    sock.write('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    const answer = await done;
    assert.ok(answer === '' || answer.startsWith('HTTP/1.1 408'), answer.slice(0, 80));
    await alive.assertAliveAfter(s.url, 0);
  });

  test('connections past the cap are dropped; the server answers again once they go', {
    timeout: 30_000,
  }, async () => {
    const held: Socket[] = [];
    for (let i = 0; i < 8; i++) held.push(await open(s.url));
    const extra = await open(s.url);
    await closedBy(extra);
    for (const h of held) h.destroy();
    let ok = false;
    for (let i = 0; i < 50 && !ok; i++) {
      ok = await fetch(`${s.url}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (!ok) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(ok, '/health answers after the held connections closed');
  });
});

describe('rate limits', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(
      'sqlite',
      { SVC_DEV_LOGIN: '1' },
      { limits: { anonPerMinute: 5, authFailuresPerMinute: 3, perCredentialPerMinute: 20 } },
    );
  });
  after(() => s.close());

  test('device codes per client address: 429 with Retry-After past the limit', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 8; i++)
      answers.push((await s.req('POST', '/v1/device/code', { token: false })).status);
    assert.deepEqual(answers.slice(0, 5), [200, 200, 200, 200, 200]);
    const r = await s.req('POST', '/v1/device/code', { token: false });
    assertError(r, 429, 'too many requests from this address');
    assert.ok(Number(r.headers.get('retry-after')) > 0);
    assert.equal((await fetch(`${s.url}/health`)).status, 200, '/health is never limited');
  });

  test('bad keys per client address: 429 after a few, even for a good key from there', async () => {
    for (let i = 0; i < 3; i++)
      assertError(await s.req('GET', '/v1/projects', { token: `dak_bad${i}xxxxxxxxxxxxxxxx` }), 401);
    const r = await s.req('GET', '/v1/projects', { token: 'dak_badagainxxxxxxxxxxxxxx' });
    assertError(r, 429, 'failed authentications');
    assert.ok(Number(r.headers.get('retry-after')) > 0);
  });
});

describe('per-credential limit and the user-code lock', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' }, { limits: { perCredentialPerMinute: 30 } });
  });
  after(() => s.close());

  test('one API key: 429 with Retry-After past its limit', async () => {
    let last = 0;
    for (let i = 0; i < 31; i++) last = (await s.req('GET', '/v1/projects')).status;
    assert.equal(last, 429);
    const r = await s.req('GET', '/v1/projects');
    assertError(r, 429, 'with this credential');
    assert.ok(Number(r.headers.get('retry-after')) > 0);
  });

  test('five unknown user codes lock approvals for that user, even for a real code', async () => {
    const who = await signIn(s, 'guesser@example.com');
    for (let i = 0; i < 5; i++) {
      const r = await s.req('POST', '/v1/device/approve', {
        token: who.session,
        body: { user_code: `BCDF-GHJ${'KMNPQ'[i]}`, team_id: who.teamId },
      });
      assertError(r, 400, 'unknown user code');
    }
    const code = await s.req('POST', '/v1/device/code', { token: false });
    const r = await s.req('POST', '/v1/device/approve', {
      token: who.session,
      body: { user_code: code.body.user_code, team_id: who.teamId },
    });
    assertError(r, 429, 'too many unknown user codes');
    assert.ok(Number(r.headers.get('retry-after')) > 60);
    const other = await signIn(s, 'owner@example.com');
    const ok = await s.req('POST', '/v1/device/approve', {
      token: other.session,
      body: { user_code: code.body.user_code, team_id: other.teamId },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });
});

describe('a blob upload needs its one-time token before its body is read', () => {
  let s: TestServer;
  const DRAIN_MS = 500;
  before(async () => {
    s = await startTestServer('sqlite', {}, { limits: { drainMaxMs: DRAIN_MS } });
  });
  after(() => s.close());

  test('a 32 MiB upload to an unknown blob is answered at once, without waiting for the body', {
    timeout: 20_000,
  }, async () => {
    const alive = watchAlive();
    const sock = await open(s.url);
    const done = closedBy(sock);
    let answered = '';
    sock.on('data', (d) => {
      answered += d.toString('latin1');
      if (answered.includes('\r\n\r\n')) sock.destroy();
    });
    sock.write(
      `PUT /v1/hosts/blobs/blob_nothing HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: ${32 * 1024 * 1024}\r\n\r\n0123456789`,
    );
    await done;
    assert.match(answered, /^HTTP\/1\.1 404/);
    // The refused body's drain was armed with its bound: the server outlives it.
    await alive.assertAliveAfter(s.url, DRAIN_MS);
  });
});
