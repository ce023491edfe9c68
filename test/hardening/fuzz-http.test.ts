// R2 (issue 9), JSON bodies and headers: 600 generated malformed bodies spread over every route
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
import { rowCounts } from './support/state.ts';

interface Op {
  method: string;
  path: string;
  fields: string[];
}

const value = fc.jsonValue({ maxDepth: 3 });
const nul = fc.string({ maxLength: 20 }).map((s) => `${s}\0${s}`);

/** A body text that no route may accept, and the content type it is sent with. */
function malformed(fields: string[]): fc.Arbitrary<{ text: string; type: string }> {
  const known = fields.length ? fc.constantFrom(...fields) : fc.constant('name');
  const json =
    (type = 'application/json') =>
    (v: unknown) => ({ text: JSON.stringify(v), type });
  return fc.oneof(
    fc
      .tuple(fc.dictionary(known, value), fc.string({ minLength: 1, maxLength: 12 }), value)
      .map(([o, k, v]) => json()({ ...o, [`zz_${k}`]: v })),
    fc.oneof(fc.array(value), fc.string(), fc.double(), fc.boolean()).map(json()),
    fc.tuple(known, nul).map(([k, v]) => json()({ [k]: v })),
    fc
      .tuple(known, fc.integer({ min: 65, max: 100_000 }))
      .map(([k, d]) => ({ text: `{"${k}":${'['.repeat(d)}${']'.repeat(d)}}`, type: 'application/json' })),
    fc.tuple(fc.dictionary(known, value), fc.nat()).map(([o, cut]) => {
      const t = JSON.stringify(o);
      return {
        text: t.slice(0, t.length > 1 ? 1 + (cut % (t.length - 1)) : 0) || '{',
        type: 'application/json',
      };
    }),
    fc
      .integer({ min: 2 * 1024 * 1024 + 1, max: 3 * 1024 * 1024 })
      .map((n) => ({ text: `{"name":"${'x'.repeat(n)}"}`, type: 'application/json' })),
    fc
      .tuple(
        fc.dictionary(known, value),
        fc.constantFrom(
          'text/plain',
          'application/xml',
          'multipart/form-data; boundary=x',
          'application/x-www-form-urlencoded',
        ),
      )
      .map(([o, type]) => ({ text: JSON.stringify(o), type })),
  );
}

describe('R2: hostile JSON bodies and headers', () => {
  let s: TestServer;
  let ops: Op[];
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
    ops = [];
    for (const [template, methods] of Object.entries(spec.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(methods)) {
        const schema = op.requestBody?.content?.['application/json']?.schema;
        if (!schema) continue;
        const path = template.replace(/\{(\w+)\}/g, (_m, n: string) => encodeURIComponent(ids[n] ?? 'x'));
        ops.push({ method: method.toUpperCase(), path, fields: Object.keys(schema.properties ?? {}) });
      }
    }
  });
  after(() => s.close());

  test('600 malformed bodies over every route with a body: 4xx, nothing changes', {
    timeout: 120_000,
  }, async () => {
    assert.ok(ops.length >= 15, `routes with a JSON body: ${ops.map((o) => o.path).join(' ')}`);
    const before = await rowCounts(s);
    const rss = process.memoryUsage().rss;
    const arb = fc
      .integer({ min: 0, max: ops.length - 1 })
      .chain((i) => malformed(ops[i].fields).map((b) => ({ op: ops[i], ...b })));
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(arb, async ({ op, text, type }) => {
        const token = op.path.startsWith('/auth/') || op.path.includes('/device/') ? false : undefined;
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
    const latin1 = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: 300,
    });
    const auth = fc.oneof(
      latin1,
      latin1.map((t) => `Bearer ${t}`),
      latin1.map((t) => `Bearer dak_${t}`),
      latin1.map((t) => `Bearer dst_${t}`),
      fc.integer({ min: 4000, max: 12_000 }).map((n) => `Bearer dak_${'a'.repeat(n)}`),
      fc.constantFrom('', 'Bearer', 'Bearer  ', 'Basic YTpi', 'bearer dak_', `Bearer ${'dak_'.repeat(3)}`),
    );
    const arb = fc.record({
      authorization: auth,
      team: fc.option(latin1),
      type: fc.option(fc.oneof(latin1, fc.constantFrom('application/json', 'application/x-tar'))),
      route: fc.constantFrom(
        ['GET', '/v1/projects', ''],
        ['POST', '/v1/projects', '{"name":"fromfuzz"}'],
        ['POST', '/v1/keys', '{}'],
        ['POST', '/v1/teams', '{"name":"t"}'],
        ['DELETE', '/v1/keys/key_x', ''],
        ['GET', '/v1/me', ''],
      ),
    });
    const before = await rowCounts(s);
    await fc.assert(
      fc.asyncProperty(arb, async ({ authorization, team, type, route: [method, path, body] }) => {
        const headers: Record<string, string> = { authorization };
        if (team !== null) headers['x-svc-team'] = team;
        if (type !== null) headers['content-type'] = type;
        else if (body) headers['content-type'] = 'application/json';
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
