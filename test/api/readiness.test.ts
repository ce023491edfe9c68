// /health says the process answers; /ready says a load balancer should send it traffic. After
// SIGTERM (server.close) a replica drains: /ready is 503 for SVC_DRAIN_SECONDS while /health and
// every API request are still answered, then it stops listening. A database that does not answer
// within the readiness bound makes /ready 503, and the process outlives that bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHttpApp } from '../../server/http/app.ts';
import { httpLimits } from '../../server/http/limits.ts';
import { READY_DB_TIMEOUT_MS, readinessRoutes } from '../../server/http/readiness.ts';
import { watchAlive } from '../support/alive.ts';
import { forEachDialect, startTestServer } from '../support/server.ts';

forEachDialect('readiness', (dialect) => {
  test('ready while serving; draining after SIGTERM: /ready 503, requests still served, then gone', async () => {
    const s = await startTestServer(dialect, { SVC_DRAIN_SECONDS: '1' });
    let closed = false;
    try {
      const ready = await s.req('GET', '/ready', { token: false });
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.body, { status: 'ready' });
      const closing = s.close().then(() => {
        closed = true;
      });
      const draining = await s.req('GET', '/ready', { token: false });
      assert.equal(draining.status, 503);
      assert.deepEqual(draining.body, { status: 'draining' });
      assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
      assert.equal(
        (await s.req('GET', '/v1/projects')).status,
        200,
        'an API request is still served while draining',
      );
      assert.equal(closed, false);
      await closing;
      await assert.rejects(fetch(`${s.url}/health`), 'it stops listening once drained');
    } finally {
      if (!closed) await s.close();
    }
  });
});

test('a database that does not answer within the bound: /ready is 503, /health 200, the process goes on', async () => {
  const app = await createHttpApp({ logger: false, version: 'test', verbose: false, limits: httpLimits() });
  readinessRoutes(app, { state: () => 'serving', ping: () => new Promise(() => {}) });
  const alive = watchAlive();
  const r = await app.inject({ method: 'GET', url: '/ready' });
  assert.equal(r.statusCode, 503);
  assert.deepEqual(r.json(), { status: 'database unreachable' });
  assert.equal((await app.inject({ method: 'GET', url: '/health' })).statusCode, 200);
  await alive.assertNothingEscapedAfter(50);
  await app.close();
  assert.ok(READY_DB_TIMEOUT_MS <= 5000);
});

test('a database that fails at once: /ready is 503 at once', async () => {
  const app = await createHttpApp({ logger: false, version: 'test', verbose: false, limits: httpLimits() });
  readinessRoutes(app, {
    state: () => 'serving',
    ping: () => Promise.reject(new Error('connection refused')),
  });
  const r = await app.inject({ method: 'GET', url: '/ready' });
  assert.equal(r.statusCode, 503);
  await app.close();
});
