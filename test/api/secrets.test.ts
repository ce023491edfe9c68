// Secrets at rest: every bearer secret the API hands out is stored only as its sha256 hash.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { hashSecret } from '../../server/identity/secrets.ts';
import { dumpDatabase, signIn } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

forEachDialect('secrets at rest', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  test('no plaintext key, session, device code, user code, approved key or join token in the database', async () => {
    const u = await signIn(s, 'secrets@example.com');
    const minted = (await s.req('POST', '/v1/keys', { body: { name: 'ci' } })).body.api_key as string;
    const pending = (await s.req('POST', '/v1/device/code', { token: false })).body;
    const approved = (await s.req('POST', '/v1/device/code', { token: false })).body;
    const ok = await s.req('POST', '/v1/device/approve', {
      token: u.session,
      body: { user_code: approved.user_code, team_id: u.teamId },
    });
    assert.equal(ok.status, 200);
    const joinToken = (await s.req('POST', '/v1/join-tokens')).body.token as string;

    const secrets: Record<string, string> = {
      'bootstrap key': s.key,
      'minted key': minted,
      session: u.session,
      'pending device code': pending.device_code,
      'pending user code': pending.user_code,
      'approved device code': approved.device_code,
      'approved user code': approved.user_code,
      'join token': joinToken,
    };
    const before = await dumpDatabase(s);
    for (const [what, secret] of Object.entries(secrets)) {
      assert.ok(!before.includes(secret), `${what} stored in clear`);
      assert.ok(before.includes(hashSecret(secret)), `${what}: its hash is what is stored`);
    }

    // The approved key exists only in memory until the CLI collects it, then only as a hash.
    const handed = await s.req('POST', '/v1/device/token', {
      token: false,
      body: { device_code: approved.device_code },
    });
    assert.equal(handed.status, 200);
    const cliKey = handed.body.api_key as string;
    assert.ok(!before.includes(cliKey), 'the approved key was in the database before hand-out');
    const afterwards = await dumpDatabase(s);
    assert.ok(!afterwards.includes(cliKey));
    assert.ok(afterwards.includes(hashSecret(cliKey)));
    for (const secret of Object.values(secrets)) assert.ok(!afterwards.includes(secret));
  });
});
