// Console sign-in through the GitHub stand-in, as a browser does it: start → the provider's
// authorize page (the fake's `user` authorizes) → callback → `<return>#token=<session>`.
import assert from 'node:assert/strict';
import type { FakeGitHub, FakeUser } from './fakes/github.ts';
import type { TestServer } from './server.ts';

async function location(url: string): Promise<URL> {
  const r = await fetch(url, { redirect: 'manual' });
  assert.equal(r.status, 302, `${url}: ${r.status} ${await r.text()}`);
  return new URL(r.headers.get('location') ?? '', url);
}

/** Signs `user` in with the code host; returns the session token. */
export async function signInAtCodehost(s: TestServer, gh: FakeGitHub, user: FakeUser): Promise<string> {
  gh.user = user;
  const authorize = await location(`${s.url}/auth/codehost/start`);
  const callback = await location(authorize.toString());
  const done = await location(callback.toString());
  const token = /^#token=(\S+)$/.exec(done.hash)?.[1];
  assert.ok(token, done.toString());
  return token;
}

let next = 7000;
/** A code-host user who can see `installations`, with a verified address of their own. */
export function codehostUser(login: string, installations: number[]): FakeUser {
  const id = ++next;
  return {
    id,
    login,
    name: login,
    emails: [{ email: `${login}@github.example`, primary: true, verified: true }],
    installations,
  };
}

export interface CodehostOwner {
  /** The server, answering as the owner's team (an API key of it is the default credential). */
  s: TestServer;
  /** The owner's console session: linking needs it. */
  session: string;
  teamId: string;
}

/**
 * A code-host user who can see `installations`, signed in (a personal team named after the
 * login) with an API key of that team; each installation already reported is linked to it.
 */
export async function codehostOwner(
  base: TestServer,
  gh: FakeGitHub,
  login: string,
  installations: number[],
  link: number[] = [],
): Promise<CodehostOwner> {
  const session = await signInAtCodehost(base, gh, codehostUser(login, installations));
  const k = await base.req('POST', '/v1/keys', { token: session, body: { name: `${login}-key` } });
  assert.equal(k.status, 201, JSON.stringify(k.body));
  const key: string = k.body.api_key;
  const s: TestServer = { ...base, key, req: (m, p, o = {}) => base.req(m, p, { token: key, ...o }) };
  for (const id of link) {
    const r = await s.req('POST', `/v1/codehost/installations/${id}/link`, { token: session });
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  const teamId: string = (await s.req('GET', '/v1/me')).body.team.ID;
  return { s, session, teamId };
}
