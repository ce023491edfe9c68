// Hostile HTTP requests shared by the JSON-body fuzz suite and the soak benchmark: bodies no route
// may accept (unknown fields, wrong types, NUL bytes, deep nesting, broken JSON, oversized, wrong
// content types) and credential and header sets no route may honour.
import fc from 'fast-check';

const value = fc.jsonValue({ maxDepth: 3 });
const nul = fc.string({ maxLength: 20 }).map((s) => `${s}\0${s}`);

/** A body text that no route taking `fields` may accept, and the content type it is sent with. */
export function malformedBody(fields: string[]): fc.Arbitrary<{ text: string; type: string }> {
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

export interface BodyRoute {
  method: string;
  path: string;
  fields: string[];
}

/**
 * Every route of an /openapi.json document that takes a JSON body, its path parameters filled
 * from `ids` (by parameter name; 'x' where none is given).
 */
export function bodyRoutes(
  spec: { paths: Record<string, Record<string, any>> },
  ids: Record<string, string>,
) {
  const out: BodyRoute[] = [];
  for (const [template, methods] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const schema = op.requestBody?.content?.['application/json']?.schema;
      if (!schema) continue;
      const path = template.replace(/\{(\w+)\}/g, (_m, n: string) => encodeURIComponent(ids[n] ?? 'x'));
      out.push({ method: method.toUpperCase(), path, fields: Object.keys(schema.properties ?? {}) });
    }
  }
  return out;
}

/** A malformed body for one of `routes`, with the route. */
export function hostileBodies(routes: BodyRoute[]) {
  return fc
    .integer({ min: 0, max: routes.length - 1 })
    .chain((i) => malformedBody(routes[i].fields).map((b) => ({ op: routes[i], ...b })));
}

/** Whether a route takes no credential (the body fuzzers send none there). */
export const anonymousRoute = (path: string): boolean =>
  path.startsWith('/auth/') || path.includes('/device/');

export interface HostileHeaders {
  method: string;
  path: string;
  /** The body, or '' for none. */
  body: string;
  headers: Record<string, string>;
}

const latin1 = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 300,
});

/** A request whose credential is missing, malformed, unknown or oversized, with odd team and type headers. */
export const hostileHeaders: fc.Arbitrary<HostileHeaders> = fc
  .record({
    authorization: fc.oneof(
      latin1,
      latin1.map((t) => `Bearer ${t}`),
      latin1.map((t) => `Bearer dak_${t}`),
      latin1.map((t) => `Bearer dst_${t}`),
      fc.integer({ min: 4000, max: 12_000 }).map((n) => `Bearer dak_${'a'.repeat(n)}`),
      fc.constantFrom('', 'Bearer', 'Bearer  ', 'Basic YTpi', 'bearer dak_', `Bearer ${'dak_'.repeat(3)}`),
    ),
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
  })
  .map(({ authorization, team, type, route: [method, path, body] }) => {
    const headers: Record<string, string> = { authorization };
    if (team !== null) headers['x-svc-team'] = team;
    if (type !== null) headers['content-type'] = type;
    else if (body) headers['content-type'] = 'application/json';
    return { method, path, body, headers };
  });
