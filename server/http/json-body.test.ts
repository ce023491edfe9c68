// JSON bodies (the fast path in app.ts): text that cannot hold a `__proto__` or `constructor`
// key is parsed with plain JSON.parse, anything else goes through Fastify's poisoning checks, so a
// poisoned body is a 400 whichever way its key is spelled, and other bodies parse as before.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type App, createHttpApp } from './app.ts';
import { mayPoison } from './limits.ts';

let app: App;
before(async () => {
  app = await createHttpApp({ logger: false, version: 'test', verbose: false });
  // A free-form body: nothing but the parser stands between a poisoned key and the handler.
  app.post('/echo', async (req) => ({ body: req.body ?? null }));
  await app.ready();
});
after(() => app.close());

const post = (payload: string) =>
  app.inject({ method: 'POST', url: '/echo', payload, headers: { 'content-type': 'application/json' } });

test('a poisoned key is a 400 however it is spelled', async () => {
  for (const raw of [
    '{"__proto__":{"admin":true}}',
    '{"a":[{"\\u005f_proto__":{"admin":true}}]}',
    '{"\\u005F\\u005Fproto\\u005F\\u005F":{"admin":true}}',
    '{"constructor":{"prototype":{"admin":true}}}',
    '{"\\u0063onstructor":{"prototype":{"admin":true}}}',
  ]) {
    const r = await post(raw);
    assert.equal(r.statusCode, 400, raw);
  }
});

test('other bodies parse as before, the words included as values', async () => {
  for (const value of [
    { cmd: ['echo', '__proto__', 'constructor'] },
    { a: { b: [1, 2, { c: null }] }, s: 'tab\there "quoted" \\ back' },
    { unicode: 'é😀\u0001' },
  ]) {
    const r = await post(JSON.stringify(value));
    assert.equal(r.statusCode, 200);
    assert.deepEqual(r.json().body, value);
  }
  const bad = await post('{"cmd":');
  assert.equal(bad.statusCode, 400);
  assert.match(bad.json().error, /malformed JSON body/);
});

test('mayPoison: only text that could spell one of the keys', () => {
  assert.equal(mayPoison('{"cmd":["true"]}'), false);
  assert.equal(mayPoison('{"k":"__proto__"}'), true);
  assert.equal(mayPoison('{"k":"constructor"}'), true);
  assert.equal(mayPoison('{"\\u0041":1}'), true);
});
