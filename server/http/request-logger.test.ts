// A request's logger is built on its first line: a request that logs nothing builds
// none, and a line it does log carries the request id as before.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { createHttpApp } from './app.ts';
import { lazyRequestLogger } from './request-logger.ts';

test('the child is built once, on the first line, with the bindings and options given', () => {
  const made: unknown[][] = [];
  const lines: unknown[][] = [];
  const child = {
    level: 'debug',
    info: (...a: unknown[]) => lines.push(['info', ...a]),
    warn: (...a: unknown[]) => lines.push(['warn', ...a]),
  };
  const parent = {
    level: 'info',
    child: (...a: unknown[]) => {
      made.push(a);
      return child;
    },
  } as unknown as FastifyBaseLogger;
  const log = lazyRequestLogger(parent, { reqId: 'req-7' }, {});
  assert.equal(log.level, 'info');
  assert.equal(made.length, 0);
  log.info({ a: 1 }, 'first');
  log.warn('second');
  assert.deepEqual(made, [[{ reqId: 'req-7' }, {}]]);
  assert.deepEqual(lines, [
    ['info', { a: 1 }, 'first'],
    ['warn', 'second'],
  ]);
  assert.equal(log.level, 'debug');
});

test('through the app: a failing request logs with its request id, a quiet one logs nothing', async () => {
  const lines: Record<string, unknown>[] = [];
  const stream = { write: (line: string) => lines.push(JSON.parse(line)) };
  const app = await createHttpApp({
    logger: { level: 'info', stream } as unknown as FastifyBaseLogger,
    version: 'test',
    verbose: false,
  });
  app.get('/quiet', async () => ({ ok: true }));
  app.get('/boom', async () => {
    throw new Error('kaput');
  });
  try {
    assert.equal((await app.inject({ method: 'GET', url: '/quiet' })).statusCode, 200);
    assert.equal(lines.filter((l) => l.reqId).length, 0);
    const r = await app.inject({ method: 'GET', url: '/boom' });
    assert.equal(r.statusCode, 500);
    const failed = lines.find((l) => l.msg === 'request failed');
    assert.ok(failed, JSON.stringify(lines));
    assert.equal(typeof failed.reqId, 'string');
    assert.equal((failed.err as { message: string }).message, 'kaput');
  } finally {
    await app.close();
  }
});
