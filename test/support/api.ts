// Small helpers for API suites: sign a user in (dev login), make a second team with its own API
// key, create a project, and read a database table back for at-rest checks.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import type { Res, TestServer } from './server.ts';

export interface SignedIn {
  session: string;
  teamId: string;
  userId: string;
}

/** Signs in through POST /auth/dev-login (the server must run with SVC_DEV_LOGIN=1). */
export async function signIn(s: TestServer, email: string, name?: string): Promise<SignedIn> {
  const r = await s.req('POST', '/auth/dev-login', {
    body: { email, ...(name ? { name } : {}) },
    token: false,
  });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const me = await s.req('GET', '/v1/me', { token: r.body.token });
  assert.equal(me.status, 200, JSON.stringify(me.body));
  return { session: r.body.token, teamId: me.body.team.ID, userId: me.body.user.ID };
}

/** A user with a personal team and an API key of that team: "another team" for isolation checks. */
export async function otherTeam(s: TestServer, email: string): Promise<SignedIn & { key: string }> {
  const who = await signIn(s, email);
  const k = await s.req('POST', '/v1/keys', { token: who.session, body: { name: 'other' } });
  assert.equal(k.status, 201, JSON.stringify(k.body));
  return { ...who, key: k.body.api_key };
}

/** Creates a project with the bootstrap key (or `token`); returns the response body. */
export async function createProject(
  s: TestServer,
  name: string,
  extra: object = {},
  token?: string,
): Promise<Res['body']> {
  const r = await s.req('POST', '/v1/projects', { body: { name, ...extra }, ...(token ? { token } : {}) });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body;
}

/** Asserts `{error}` with the status and, when given, a phrase of the message. */
export function assertError(r: Res, status: number, phrase?: string | RegExp): void {
  assert.equal(r.status, status, `expected ${status}, got ${r.status}: ${JSON.stringify(r.body)}`);
  assert.equal(typeof r.body?.error, 'string', `no {error} in ${JSON.stringify(r.body)}`);
  assert.deepEqual(Object.keys(r.body), ['error']);
  if (phrase instanceof RegExp) assert.match(r.body.error, phrase);
  else if (phrase) assert.ok(r.body.error.includes(phrase), `'${phrase}' not in '${r.body.error}'`);
}

/** Every text value of every row of every user table, for "no plaintext secret at rest" checks. */
export async function dumpDatabase(s: TestServer): Promise<string> {
  const db = s.server.ctx.db;
  const tables =
    db.dialect.name === 'sqlite'
      ? await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      : await db.all<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
        );
  let out = '';
  for (const { name } of tables) {
    if (!/^[a-z_]+$/.test(name)) continue;
    // The replica's own heartbeat renews its lease there every few seconds, whatever requests do.
    if (name === 'replicas') continue;
    out += `${JSON.stringify(await db.all(`SELECT * FROM ${name}`))}\n`;
  }
  return out;
}

/**
 * A request with no body and no body headers at all (no content-type, no content-length), as
 * `curl -X POST` sends it; fetch always adds `content-length: 0`.
 */
export function bareRequest(
  base: string,
  path: string,
  token: string,
  method = 'POST',
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    // Written, not ended: a half-closed socket makes Node's server drop the request.
    const sock = connect(Number(url.port), url.hostname, () => {
      sock.write(
        `${method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n` +
          `Authorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
      );
    });
    const chunks: Buffer[] = [];
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', reject);
    sock.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const raw = text.slice(text.indexOf('\r\n\r\n') + 4);
      let body: unknown = raw;
      try {
        body = JSON.parse(raw);
      } catch {}
      resolve({ status, body });
    });
  });
}
