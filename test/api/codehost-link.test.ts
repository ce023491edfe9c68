// Who may link an installation: only a user signed in with the code host, and only an installation
// the code host lists for that user (`GET /user/installations` with the user's own token, every page
// of it). Another team's user who cannot see it gets the same answer as for an id never reported,
// so ids cannot be probed; an API key cannot link at all. The user's token is sealed at rest,
// renewed with its refresh token when it has expired, and forgotten when the code host refuses it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError, dumpDatabase, signIn } from '../support/api.ts';
import { codehostOwner, codehostUser, signInAtCodehost } from '../support/codehost.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { installationCreated, sendWebhook } from '../support/webhooks.ts';

const VICTIM = 9001;
const OTHER = 9002;
/** Visible to team B's user, never reported by the app. */
const UNREPORTED = 9003;

forEachDialect('linking an installation needs a user the code host lets see it', (dialect) => {
  let s: TestServer;
  let gh: FakeGitHub;
  const link = (id: number, token: string) =>
    s.req('POST', `/v1/codehost/installations/${id}/link`, { token });
  const owner = async (id: number) =>
    (
      await s.server.ctx.db.get<{ team_id: string }>(
        'SELECT team_id FROM installations WHERE installation_id = ?',
        [id],
      )
    )?.team_id;

  before(async () => {
    gh = await new FakeGitHub().start();
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1', ...gh.env() });
    for (const [id, login] of [
      [VICTIM, 'victim-org'],
      [OTHER, 'b-org'],
    ] as const) {
      assert.equal((await sendWebhook(s, 'installation', installationCreated(id, login))).status, 200);
    }
  });
  after(async () => {
    await s?.close();
    await gh?.close();
  });

  test("team B cannot take the victim's installation: the same 404 as an unreported id; the owner links it", async () => {
    const b = await codehostOwner(s, gh, 'b-user', [OTHER, UNREPORTED]);
    const notYours = await link(VICTIM, b.session);
    const unseen = await link(UNREPORTED, b.session);
    const unknown = await link(123456789, b.session);
    assertError(notYours, 404);
    for (const [r, id] of [
      [unseen, UNREPORTED],
      [unknown, 123456789],
    ] as const) {
      assert.equal(r.status, notYours.status);
      assert.equal(r.body.error.replace(String(id), 'N'), notYours.body.error.replace(String(VICTIM), 'N'));
    }
    assert.equal(await owner(VICTIM), '', 'nothing changed');
    assertError(await s.req('GET', `/v1/codehost/repos?installation=${VICTIM}`, { token: b.session }), 404);
    // B's own installation links.
    assert.equal((await link(OTHER, b.session)).status, 200);
    assert.equal(await owner(OTHER), b.teamId);

    const victim = await codehostOwner(s, gh, 'victim-user', [VICTIM]);
    const mine = await link(VICTIM, victim.session);
    assert.equal(mine.status, 200, JSON.stringify(mine.body));
    assert.equal(mine.body.installation.TeamID, victim.teamId);
    assert.equal(mine.body.installation.AccountLogin, 'victim-org');
    // A colleague who can see it too, from another team: 409, it is linked already.
    const colleague = await codehostOwner(s, gh, 'victim-colleague', [VICTIM]);
    assertError(await link(VICTIM, colleague.session), 409, 'another team');
    assert.equal(await owner(VICTIM), victim.teamId);
    // The question went to the code host with each user's own token.
    const asked = gh.calls('GET', '/api/v3/user/installations');
    assert.ok(asked.length >= 5 && asked.every((c) => /^Bearer ghu_/.test(c.auth)));
  });

  test('an API key cannot link (403 naming sign-in); nor a session without a code-host sign-in', async () => {
    const before = await owner(OTHER);
    assertError(
      await s.req('POST', `/v1/codehost/installations/${OTHER}/link`),
      403,
      'signed in with the code host',
    );
    const dev = await signIn(s, 'dev-only@example.com');
    assertError(await link(OTHER, dev.session), 403, 'signed in with the code host');
    assert.equal(await owner(OTHER), before);
  });

  test('every page of /user/installations is read', async () => {
    const many = Array.from({ length: 250 }, (_, i) => 20_000 + i);
    const target = many.at(-1) as number;
    assert.equal((await sendWebhook(s, 'installation', installationCreated(target, 'far-org'))).status, 200);
    const u = await codehostOwner(s, gh, 'many-user', many);
    const r = await link(target, u.session);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const pages = gh
      .calls('GET', '/api/v3/user/installations')
      .slice(-3)
      .map((c) => new URL(c.path, gh.url).searchParams.get('page'));
    assert.deepEqual(pages, ['1', '2', '3']);
  });

  test('the user token is sealed at rest; an expired one is renewed, a refused one forgotten (403)', async () => {
    gh.expiringTokens = true;
    const id = 31_000;
    assert.equal((await sendWebhook(s, 'installation', installationCreated(id, 'exp-org'))).status, 200);
    const user = codehostUser('expiring-user', [id]);
    const session = await signInAtCodehost(s, gh, user);
    const dump = await dumpDatabase(s);
    assert.ok(!/gh[ur]_[0-9a-f]{24}/.test(dump), 'no user or refresh token in clear');
    // Its 8 hours pass: the sealed document says so.
    const box = s.server.ctx.secrets;
    const db = s.server.ctx.db;
    const row = await db.get<{ user_id: string; sealed: string }>(
      'SELECT user_id, sealed FROM codehost_user_tokens ORDER BY updated_at DESC LIMIT 1',
    );
    assert.ok(row);
    const kept = JSON.parse(box.open(row.sealed));
    await db.run('UPDATE codehost_user_tokens SET sealed = ? WHERE user_id = ?', [
      box.seal(JSON.stringify({ ...kept, expiresAt: Date.now() - 1000 })),
      row.user_id,
    ]);
    const refreshes = () =>
      gh.calls('POST', '/login/oauth/access_token').filter((c) => c.body?.grant_type === 'refresh_token');
    const r = await link(id, session);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(refreshes().length, 1);
    assert.equal(refreshes()[0].body.refresh_token, kept.refresh);
    // Revoked at the code host: 403 asking to sign in again, and the token is gone.
    gh.revokeUserTokens();
    assertError(await link(id, session), 403, 'sign in with the code host again');
    assertError(await link(id, session), 403, 'signed in with the code host');
    gh.expiringTokens = false;
  });

  // Only a Postgres control plane can run without a secrets key (SQLite makes a key file).
  if (dialect === 'postgres')
    test('without a secrets key, sign-in still works and linking is 503 naming SVC_SECRETS_KEY', async () => {
      const bare = await startTestServer(dialect, { ...gh.env(), SVC_SECRETS_KEY: '' });
      try {
        assert.equal(
          (await sendWebhook(bare, 'installation', installationCreated(OTHER, 'b-org'))).status,
          200,
        );
        const session = await signInAtCodehost(bare, gh, codehostUser('keyless', [OTHER]));
        assertError(
          await bare.req('POST', `/v1/codehost/installations/${OTHER}/link`, { token: session }),
          503,
          'SVC_SECRETS_KEY',
        );
      } finally {
        await bare.close();
      }
    });
});
