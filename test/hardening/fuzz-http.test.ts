// Fuzzing JSON bodies and headers: 600 generated malformed bodies spread over every route
// of /openapi.json that takes one (unknown fields, wrong types, non-objects, deep nesting, NUL
// bytes, broken JSON, oversized, wrong content types), and 500 generated credential and header
// sets. Each answer is a 4xx `{error}`, no row changes, the server stays up and bounded.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { createProject } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { runs } from './support/fuzz.ts';
import {
  anonymousRoute,
  type BodyRoute,
  bodyRoutes,
  hostileBodies,
  hostileHeaders,
} from './support/http-gen.ts';
import { rowCounts } from './support/state.ts';

describe('hostile JSON bodies and headers', () => {
  let s: TestServer;
  let ops: BodyRoute[];
  before(async () => {
    s = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' }, { limits: NO_RATE_LIMITS });
    const p = await createProject(s, 'httpfuzz');
    const key = (await s.req('POST', '/v1/keys', { body: { name: 'k' } })).body.key.ID;
    const ids: Record<string, string> = {
      project: 'httpfuzz',
      env: p.environments[0].ID,
      id: key,
      name: 'nocloud',
      dep: 'dep_x',
    };
    const spec = (await s.req('GET', '/openapi.json')).body;
    ops = bodyRoutes(spec, ids);
  });
  after(() => s.close());

  test('600 malformed bodies over every route with a body: 4xx, nothing changes', {
    timeout: 120_000,
  }, async () => {
    assert.ok(ops.length >= 15, `routes with a JSON body: ${ops.map((o) => o.path).join(' ')}`);
    const before = await rowCounts(s);
    const rss = process.memoryUsage().rss;
    const arb = hostileBodies(ops);
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(arb, async ({ op, text, type }) => {
        const token = anonymousRoute(op.path) ? false : undefined;
        const r = await s.req(op.method, op.path, { raw: text, token, headers: { 'content-type': type } });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        assert.ok(
          r.status >= 400 && r.status < 500,
          `${op.method} ${op.path}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
        );
        assert.equal(typeof r.body?.error, 'string');
      }),
      runs(600),
    );
    assert.deepEqual(await rowCounts(s), before, JSON.stringify([...statuses]));
    assert.ok(process.memoryUsage().rss - rss < 768 * 1024 * 1024, 'memory stayed bounded');
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  });

  test('500 hostile credential and header sets: 4xx, nothing changes', { timeout: 120_000 }, async () => {
    const before = await rowCounts(s);
    await fc.assert(
      fc.asyncProperty(hostileHeaders, async ({ method, path, body, headers }) => {
        const r = await s.req(method, path, { raw: body || undefined, token: false, headers });
        assert.ok(
          r.status >= 400 && r.status < 500,
          `${method} ${path} ${JSON.stringify(headers).slice(0, 200)}: ${r.status}`,
        );
      }),
      runs(500),
    );
    assert.deepEqual(await rowCounts(s), before);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  });
});
