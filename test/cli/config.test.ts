// Credential and server precedence (spec "Command-line client", rule 5): SVC_API_KEY first, else
// the config file, which is read only when SVC_API_KEY is unset; the server is SVC_SERVER, then
// the file's server, then http://localhost:8080; the file lives under XDG_CONFIG_HOME or ~/.config.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../support/server.ts';
import { assertExit, assertFails, freePort, removeDir, svc, tempDir } from './harness.ts';

function writeConfig(base: string, data: unknown): string {
  const dir = join(base, 'svc');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'config.json');
  writeFileSync(path, typeof data === 'string' ? data : JSON.stringify(data), { mode: 0o600 });
  return path;
}

/** Listens on localhost:8080 (the default server) when it is free; records what arrives. */
async function listenOn8080(): Promise<{ server: Server; seen: IncomingMessage[] } | null> {
  const seen: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    seen.push(req);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ team: { ID: 'default-server', Name: 'at localhost:8080' } }));
  });
  return new Promise((resolve) => {
    server.once('error', () => resolve(null));
    server.listen(8080, '127.0.0.1', () => resolve({ server, seen }));
  });
}

describe('credential and server precedence', () => {
  let t: TestServer;
  let home: string;
  let dead: string;
  before(async () => {
    t = await startTestServer('sqlite');
    home = tempDir();
    dead = `http://127.0.0.1:${await freePort()}`;
  });
  after(async () => {
    await t.close();
    removeDir(home);
  });
  const whoami = (env: Record<string, string | undefined>, h = home) => svc(['whoami'], { home: h, env });
  const teamName = async () => (await t.req('GET', '/v1/me')).body.team.Name;

  test('SVC_API_KEY and SVC_SERVER alone are enough (no file)', async () => {
    const r = await whoami({ SVC_API_KEY: t.key, SVC_SERVER: t.url });
    assertExit(r, 0);
    assert.equal(JSON.parse(r.stdout).team.Name, await teamName());
  });

  test('the file gives the key and the server when SVC_API_KEY is unset', async () => {
    const h = tempDir();
    writeConfig(join(h, '.config'), { server: t.url, api_key: t.key, team: 'x' });
    const r = await whoami({}, h);
    assertExit(r, 0);
    // Printed exactly as the API answered, indented by two spaces.
    const me = await t.req('GET', '/v1/me');
    assert.equal(r.stdout, `${JSON.stringify(me.body, null, 2)}\n`);
    removeDir(h);
  });

  test('SVC_API_KEY wins over the file key', async () => {
    const h = tempDir();
    writeConfig(join(h, '.config'), { server: t.url, api_key: 'dak_revoked_or_wrong' });
    assertExit(await whoami({ SVC_API_KEY: t.key, SVC_SERVER: t.url }, h), 0);
    const fileOnly = await whoami({}, h);
    assertFails(fileOnly, '(HTTP 401)');
    removeDir(h);
  });

  test('the file is not read at all when SVC_API_KEY is set', async () => {
    const h = tempDir();
    writeConfig(join(h, '.config'), '{ not json');
    assertExit(await whoami({ SVC_API_KEY: t.key, SVC_SERVER: t.url }, h), 0);
    assertFails(await whoami({ SVC_SERVER: t.url }, h), /^svc: cannot read .*config\.json: not JSON/);
    removeDir(h);
  });

  test('SVC_SERVER wins over the file server', async () => {
    const h = tempDir();
    writeConfig(join(h, '.config'), { server: dead, api_key: t.key });
    assertExit(await whoami({ SVC_SERVER: t.url }, h), 0);
    assertFails(await whoami({}, h), `svc: cannot reach ${dead}: `);
    removeDir(h);
  });

  test('XDG_CONFIG_HOME moves the file; ~/.config is then ignored', async () => {
    const h = tempDir();
    const xdg = join(h, 'xdg');
    writeConfig(xdg, { server: t.url, api_key: t.key });
    writeConfig(join(h, '.config'), { server: dead, api_key: 'dak_wrong' });
    assertExit(await whoami({ XDG_CONFIG_HOME: xdg }, h), 0);
    assertFails(await whoami({}, h), `cannot reach ${dead}`);
    removeDir(h);
  });

  test('a file without a key is not signed in', async () => {
    const h = tempDir();
    writeConfig(join(h, '.config'), { server: t.url });
    const r = await whoami({}, h);
    assertExit(r, 1);
    assert.equal(r.stderr, 'svc: not signed in: run svc login or set SVC_API_KEY\n');
    removeDir(h);
  });

  test('the default server is http://localhost:8080, also when SVC_API_KEY hides the file server', async (ctx) => {
    const fake = await listenOn8080();
    if (!fake) {
      // Where every tier is required (CI), a busy port is a failure, never a silent skip.
      if (process.env.SVC_REQUIRE_TIERS)
        assert.fail('port 8080 is taken: the default-server test cannot run');
      ctx.skip('*** port 8080 is taken on this machine: the default-server test cannot run ***');
      return;
    }
    try {
      const h = tempDir();
      writeConfig(join(h, '.config'), { api_key: 'dak_from_file' });
      const fromFile = await whoami({}, h);
      assertExit(fromFile, 0);
      assert.equal(JSON.parse(fromFile.stdout).team.ID, 'default-server');
      assert.equal(fake.seen.at(-1)?.headers.authorization, 'Bearer dak_from_file');
      // With SVC_API_KEY set the file (and its server) is not read: the default applies.
      writeConfig(join(h, '.config'), { server: t.url, api_key: 'dak_from_file' });
      const fromEnv = await whoami({ SVC_API_KEY: 'dak_from_env' }, h);
      assertExit(fromEnv, 0);
      assert.equal(fake.seen.at(-1)?.headers.authorization, 'Bearer dak_from_env');
      assert.equal(fake.seen.at(-1)?.url, '/v1/me');
      removeDir(h);
    } finally {
      fake.server.close();
    }
  });
});
