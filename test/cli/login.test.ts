// `svc login` end to end: the device flow against a real server (SVC_DEV_LOGIN=1 for a session),
// approval through POST /v1/device/approve, the config file (0600 in a 0700 directory) and the
// printed line; and the clear failures of a refused or unreachable login.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { signIn } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { assertExit, assertFails, freePort, type Run, removeDir, svc, tempDir } from './harness.ts';

const USER_CODE = /enter the code ([BCDFGHJKMNPQRSTVWXZ]{4}-[BCDFGHJKMNPQRSTVWXZ]{4})/;

describe('svc login', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' });
  });
  after(() => t.close());

  /** Runs login, approves the printed user code as `email`, and returns the run. */
  async function loginAs(email: string, args: string[], env: Record<string, string>, home: string) {
    const who = await signIn(t, email);
    let approved: Promise<unknown> | undefined;
    const onStdout = (soFar: string, _child: ChildProcess) => {
      const m = USER_CODE.exec(soFar);
      if (!m || approved) return;
      approved = t
        .req('POST', '/v1/device/approve', {
          token: who.session,
          body: { user_code: m[1], team_id: who.teamId },
        })
        .then((r) => assert.equal(r.status, 200, JSON.stringify(r.body)));
    };
    const run = await svc(['login', ...args], { home, env, onStdout });
    assert.ok(approved, `no user code in:\n${run.stdout}\n${run.stderr}`);
    await approved;
    const me = await t.req('GET', '/v1/me', { token: who.session });
    return { run, teamName: me.body.team.Name as string };
  }

  function checkSaved(run: Run, path: string, teamName: string) {
    assertExit(run, 0);
    assert.match(run.stdout, /^To sign in, open .*\/app\/device\/ and enter the code /m);
    assert.match(run.stdout, /\/app\/device\/\?user_code=[A-Z]{4}-[A-Z]{4}/);
    assert.equal(
      run.stdout.trimEnd().split('\n').at(-1),
      `Signed in to team ${teamName}. Key saved to ${path}.`,
    );
    assert.equal(statSync(path).mode & 0o777, 0o600);
    assert.equal(statSync(join(path, '..')).mode & 0o777, 0o700);
    const saved = JSON.parse(readFileSync(path, 'utf8'));
    assert.deepEqual(Object.keys(saved).sort(), ['api_key', 'server', 'team']);
    assert.equal(saved.server, t.url);
    assert.equal(saved.team, teamName);
    assert.match(saved.api_key, /^dak_/);
    return saved;
  }

  test('--no-browser: prints the code, polls until approved, saves the key, which then works', async () => {
    const homeA = tempDir();
    const homeB = tempDir();
    const xdg = join(homeB, 'xdg');
    // Two logins at once: SVC_SERVER + ~/.config, and --server + XDG_CONFIG_HOME with flags login ignores.
    const [a, b] = await Promise.all([
      loginAs('ada@example.com', ['--no-browser'], { SVC_SERVER: t.url }, homeA),
      loginAs(
        'bob@example.com',
        ['--bogus', '--server', t.url, 'stray', '--no-browser'],
        { XDG_CONFIG_HOME: xdg, SVC_SERVER: 'http://127.0.0.1:1' },
        homeB,
      ),
    ]);
    const savedA = checkSaved(a.run, join(homeA, '.config', 'svc', 'config.json'), a.teamName);
    checkSaved(b.run, join(xdg, 'svc', 'config.json'), b.teamName);
    // The saved key is the credential from now on: no SVC_* variable needed.
    const who = await svc(['whoami'], { home: homeA });
    assertExit(who, 0);
    assert.equal(JSON.parse(who.stdout).team.Name, a.teamName);
    const keys = await t.req('GET', '/v1/me', { token: savedA.api_key });
    assert.equal(keys.status, 200);
    removeDir(homeA);
    removeDir(homeB);
  });
});

/** A device-flow server that refuses the poll the way the spec allows (interval 1 s to be quick). */
async function refusingServer(status: number, error: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/v1/device/code') {
      res.end(
        JSON.stringify({
          device_code: 'ddc_x',
          user_code: 'BCDF-GHJK',
          verification_uri: 'http://console.invalid/device',
          verification_uri_complete: 'http://console.invalid/device?code=BCDF-GHJK',
          expires_in: 900,
          interval: 1,
        }),
      );
      return;
    }
    res.statusCode = status;
    res.end(JSON.stringify({ error }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

describe('svc login failures', () => {
  let home: string;
  before(() => {
    home = tempDir();
  });
  after(() => removeDir(home));

  for (const [status, error, phrase] of [
    [400, 'expired_token', 'the code expired'],
    [400, 'invalid_device_code', 'login failed: invalid_device_code'],
    [410, 'the key for this device code was already handed out', 'already handed out (HTTP 410)'],
  ] as const) {
    test(`a ${status} ${error} poll stops with a clear error and writes nothing`, async () => {
      const { server, url } = await refusingServer(status, error);
      try {
        const r = await svc(['login', '--no-browser', '--server', url], { home });
        assertFails(r, phrase);
        assert.match(r.stdout, /enter the code BCDF-GHJK/);
        assert.throws(() => statSync(join(home, '.config', 'svc', 'config.json')));
      } finally {
        server.close();
      }
    });
  }

  test('without --no-browser it opens verification_uri_complete; no opener is not an error', async () => {
    const { server, url } = await refusingServer(400, 'expired_token');
    try {
      const bin = join(home, 'bin');
      mkdirSync(bin, { recursive: true });
      const opened = join(home, 'opened.txt');
      writeFileSync(join(bin, 'xdg-open'), `#!/bin/sh\necho "$1" > '${opened}'\n`, { mode: 0o755 });
      const r = await svc(['login', '--server', url], { home, env: { PATH: `${bin}:/usr/bin:/bin` } });
      assertFails(r, 'the code expired');
      assert.equal(readFileSync(opened, 'utf8').trim(), 'http://console.invalid/device?code=BCDF-GHJK');
      const none = await svc(['login', '--server', url], { home, env: { PATH: join(home, 'empty') } });
      assertFails(none, 'the code expired');
    } finally {
      server.close();
    }
  });

  test('an unreachable server is one line', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    assertFails(
      await svc(['login', '--no-browser', '--server', url], { home }),
      `svc: cannot reach ${url}: `,
    );
  });

  test('an invalid --server is refused', async () => {
    assertFails(await svc(['login', '--server', 'nope'], { home }), "invalid server URL 'nope'");
  });
});
