// Signed webhook payloads are still input: the fields the control plane reads are checked (ids are
// positive safe integers, strings bounded, commit ids hex) and a bad one is a 400 naming the field
// that records nothing: not the installation, not the delivery (the same delivery id, sent again
// well-formed, is handled as new).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { assertError, dumpDatabase } from '../support/api.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { installationCreated, pushPayload, sendWebhook } from '../support/webhooks.ts';

forEachDialect('webhook payloads are checked before anything is recorded', (dialect) => {
  let s: TestServer;
  let gh: FakeGitHub;
  const rows = async () =>
    (
      await s.server.ctx.db.all<{ installation_id: number | string }>(
        'SELECT installation_id FROM installations ORDER BY installation_id',
      )
    ).map((r) => Number(r.installation_id));

  before(async () => {
    gh = await new FakeGitHub().start();
    s = await startTestServer(dialect, gh.env());
  });
  after(async () => {
    await s?.close();
    await gh?.close();
  });

  test('installation.id must be a positive safe integer; the refused delivery is not recorded', async () => {
    const created = installationCreated(1, 'acme');
    const withId = (id: unknown) => ({ ...created, installation: { ...created.installation, id } });
    for (const id of [-5, 0, 1.5, '7', 2 ** 53, null]) {
      const r = await sendWebhook(s, 'installation', withId(id), { id: `bad-id-${String(id)}` });
      assertError(r, 400, 'installation.id');
    }
    const noInstallation = { ...created, installation: undefined };
    assertError(await sendWebhook(s, 'installation', noInstallation), 400, 'installation');
    assert.deepEqual(await rows(), []);
    // The delivery id of a refused body is free: sent again well-formed, it is handled.
    const again = await sendWebhook(s, 'installation', withId(5), { id: 'bad-id--5' });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.installation, 5);
    // The largest id JavaScript holds exactly fits both databases.
    const big = Number.MAX_SAFE_INTEGER;
    assert.equal((await sendWebhook(s, 'installation', withId(big))).status, 200);
    assert.deepEqual(await rows(), [5, big]);
  });

  test('strings are bounded: a login past 100 characters is 400', async () => {
    const created = installationCreated(6, 'x'.repeat(101));
    assertError(await sendWebhook(s, 'installation', created), 400, 'installation.account.login');
    assertError(await sendWebhook(s, 'installation', { ...created, action: 'a'.repeat(65) }), 400, 'action');
    assert.ok(!(await rows()).includes(6));
  });

  test('push: the commit id, ref, repository name and installation id are checked', async () => {
    const good = pushPayload('acme/shop', 'main', 'a'.repeat(40));
    const cases: [object, string][] = [
      [{ ...good, after: 'not-a-sha' }, 'after'],
      [{ ...good, after: 'A'.repeat(40) }, 'after'],
      [{ ...good, ref: `refs/heads/${'b'.repeat(300)}` }, 'ref'],
      [
        { ...good, repository: { ...good.repository, full_name: `acme/${'r'.repeat(200)}` } },
        'repository.full_name',
      ],
      [{ ...good, repository: { ...good.repository, full_name: 7 } }, 'repository.full_name'],
      [{ ...good, installation: { id: -1 } }, 'installation.id'],
    ];
    const before = await dumpDatabase(s);
    for (const [body, field] of cases) assertError(await sendWebhook(s, 'push', body), 400, field);
    assert.equal(await dumpDatabase(s), before, 'nothing recorded');
    const ok = await sendWebhook(s, 'push', good);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.deepEqual(ok.body.projects, []);
  });
});
