// The console in real Chromium on the real control plane: dev login → projects, the
// sign-in fragment, `svc login --no-browser` approved on the device page (by keyboard), a wrong
// or expired code approving nothing, the team switch, keys, clouds and the join command. Every
// session ends by asserting no page error and no request to another origin (browser.ts).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { hashSecret } from '../../server/identity/secrets.ts';
import { assertExit, removeDir, svc, tempDir } from '../cli/harness.ts';
import { signIn } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { type ConsoleBrowser, devLogin, openBrowser, sessionOf } from './browser.ts';

const T = { timeout: 120_000 };

describe('console: sign-in, device approval, team, keys, clouds, hosts', { skip: tier('browser') }, () => {
  let s: TestServer;
  let b: ConsoleBrowser;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' });
    b = await openBrowser(s.url);
  });
  after(async () => {
    try {
      await b?.close();
    } finally {
      await s?.close();
    }
  });

  test('dev login → projects; landmarks, a skip link first in tab order; create a project', T, async () => {
    const { page } = b;
    await page.goto(`${s.url}/app/`);
    await page.getByRole('heading', { name: 'Sign in to svc', level: 1 }).waitFor();
    await page.getByRole('main').waitFor();
    await page.getByRole('banner').waitFor();
    await b.shot('sign-in');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate('document.activeElement?.textContent'), 'Skip to content');
    await devLogin(page, s.url, 'ada@example.com');
    await page.getByRole('heading', { name: 'Projects', level: 1 }).waitFor();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    assert.match(await sessionOf(page), /^dst_/);
    assert.ok(!page.url().includes('dst_'), page.url());

    await page.getByLabel('Project name').fill('demo');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByRole('heading', { name: 'Project demo', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'alpha' }).waitFor();
    await b.shot('project');
    await page.getByRole('link', { name: 'Projects' }).click();
    await page.getByRole('link', { name: 'demo' }).waitFor();
    // An in-app navigation moves focus to the new page's <main> (screen readers read it next).
    assert.equal(await page.evaluate('document.activeElement?.id'), 'main');
    await b.shot('projects');
  });

  test('the sign-in fragment #token= is stored and removed from the address at once', T, async () => {
    const who = await signIn(s, 'frag@example.com');
    const page = await b.context.newPage();
    try {
      await page.goto(`${s.url}/app/keys/#token=${who.session}`);
      await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
      assert.equal(page.url(), `${s.url}/app/keys/`);
      assert.equal(await page.evaluate('location.hash'), '');
      assert.equal(await sessionOf(page), who.session);
      // The history entry was replaced, not added to: back is the blank tab, forward the clean URL.
      await page.goBack();
      assert.equal(page.url(), 'about:blank');
      await page.goForward();
      assert.equal(page.url(), `${s.url}/app/keys/`);
    } finally {
      await page.close();
    }
    // The other tab followed the sign-in (same storage): sign back in as ada for the next tests.
    await b.page.getByRole('button', { name: 'Sign out' }).click();
    await devLogin(b.page, s.url, 'ada@example.com');
    await b.page.getByRole('heading', { name: 'Projects', level: 1 }).waitFor();
  });

  test(
    'svc login --no-browser, approved on the device page by keyboard: the CLI gets a working key',
    T,
    async () => {
      const { page } = b;
      const home = tempDir();
      try {
        let link: (url: string) => void = () => {};
        const linked = new Promise<string>((r) => {
          link = r;
        });
        const run = svc(['login', '--no-browser', '--server', s.url], {
          home,
          onStdout: (out) => {
            const m = /\(direct link: (\S+)\)/.exec(out);
            if (m) link(m[1]);
          },
          timeoutMs: 100_000,
        });
        const url = await linked;
        assert.match(url, new RegExp(`^${s.url}/app/device/\\?user_code=[A-Z]{4}-[A-Z]{4}$`));
        await page.goto(url);
        await page.getByRole('heading', { name: 'Approve a CLI sign-in', level: 1 }).waitFor();
        const code = new URL(url).searchParams.get('user_code') as string;
        assert.equal(await page.getByLabel('Code').inputValue(), code);
        assert.equal(
          await page.getByLabel('Team').inputValue(),
          (await s.req('GET', '/v1/me', { token: await sessionOf(page) })).body.team.ID,
        );
        await b.shot('device');
        await page.getByLabel('Code').focus();
        for (const _ of ['Team', 'Key name', 'Approve']) await page.keyboard.press('Tab');
        await page.keyboard.press('Enter');
        await page.getByText('Approved: the CLI now receives an API key').waitFor();
        const r = await run;
        assertExit(r, 0);
        const saved = JSON.parse(readFileSync(join(home, '.config', 'svc', 'config.json'), 'utf8'));
        const me = await s.req('GET', '/v1/me', { token: saved.api_key });
        assert.equal(me.status, 200);
        assert.equal(me.body.team.Name, saved.team);
        assert.match(r.stdout, new RegExp(`Signed in to team ${saved.team}\\.`));
      } finally {
        removeDir(home);
      }
    },
  );

  test('signed out, the device link asks for sign-in first, then approves that very code', T, async () => {
    const fresh = await openBrowser(s.url);
    try {
      const c = (await s.req('POST', '/v1/device/code', { token: false })).body;
      const { page } = fresh;
      await page.goto(c.verification_uri_complete);
      await page.getByText(`Sign in to approve the CLI sign-in with code ${c.user_code}.`).waitFor();
      await fresh.shot('device-signed-out');
      await page.getByLabel('Email').fill('newcomer@example.com');
      await page.getByRole('button', { name: 'Dev login' }).click();
      await page.getByRole('heading', { name: 'Approve a CLI sign-in', level: 1 }).waitFor();
      assert.equal(await page.getByLabel('Code').inputValue(), c.user_code);
      await page.getByRole('button', { name: 'Approve' }).click();
      await page
        .getByRole('status')
        .getByText(/^Approved: /)
        .waitFor();
      const got = await s.req('POST', '/v1/device/token', {
        token: false,
        body: { device_code: c.device_code },
      });
      assert.equal(got.status, 200, JSON.stringify(got.body));
      assert.equal((await s.req('GET', '/v1/me', { token: got.body.api_key })).body.team.Name, 'newcomer');
    } finally {
      await fresh.close();
    }
  });

  test('a wrong code approves nothing; an expired code says so and approves nothing', T, async () => {
    const { page } = b;
    const token = await sessionOf(page);
    const keysBefore = (await s.req('GET', '/v1/keys', { token })).body.keys.length;
    const pending = (await s.req('POST', '/v1/device/code', { token: false })).body;
    await page.goto(`${s.url}/app/device/?user_code=BBBB-BBBB`);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.getByRole('alert').getByText('Not approved: unknown user code').waitFor();
    await b.shot('device-wrong-code');

    await s.server.ctx.db.run('UPDATE device_codes SET expires_at = ? WHERE user_code_hash = ?', [
      '2000-01-01T00:00:00.000Z',
      hashSecret(pending.user_code),
    ]);
    await page.goto(`${s.url}/app/device/?user_code=${pending.user_code}`);
    await page.getByRole('button', { name: 'Approve' }).click();
    await page
      .getByRole('alert')
      .getByText(/Not approved: .*expired/)
      .waitFor();

    const poll = await s.req('POST', '/v1/device/token', {
      token: false,
      body: { device_code: pending.device_code },
    });
    assert.equal(poll.status, 400, JSON.stringify(poll.body));
    assert.ok(!('api_key' in poll.body));
    assert.equal((await s.req('GET', '/v1/keys', { token })).body.keys.length, keysBefore, 'no key minted');
  });

  test('team switch; keys shown once and revoked; clouds; the join command ready to copy', T, async () => {
    const { page } = b;
    const token = await sessionOf(page);
    const first = (await s.req('GET', '/v1/me', { token })).body.team.ID;
    assert.equal((await s.req('POST', '/v1/teams', { token, body: { name: 'second' } })).status, 201);
    await page.goto(`${s.url}/app/`);
    const team = page.getByLabel('Team');
    await team.selectOption({ label: 'second (owner)' });
    await page.getByText('No projects yet.').waitFor();
    assert.equal(
      await page.getByRole('link', { name: 'demo' }).count(),
      0,
      "the first team's project is gone",
    );
    await b.shot('team-switch');
    await team.selectOption(first);
    await page.getByRole('link', { name: 'demo' }).waitFor();

    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Key name').fill('ci');
    await page.getByRole('button', { name: 'Create key' }).click();
    const material = await page.getByRole('textbox', { name: 'New API key' }).inputValue();
    assert.match(material, /^dak_/);
    await b.shot('keys');
    assert.equal((await s.req('GET', '/v1/me', { token: material })).status, 200);
    await page.getByRole('button', { name: 'I have copied it' }).click();
    assert.equal(await page.getByRole('textbox', { name: 'New API key' }).count(), 0, 'shown once');
    await page.getByRole('button', { name: /^Revoke key ci / }).click();
    await page.getByRole('row', { name: /^ci .*revoked/ }).waitFor();
    assert.equal((await s.req('GET', '/v1/me', { token: material })).status, 401);

    await page.getByRole('link', { name: 'Clouds' }).click();
    await page.getByLabel('Cloud name (optional)').fill('rack');
    await page.getByRole('button', { name: 'Add cloud' }).click();
    await page.getByRole('rowheader', { name: 'rack' }).waitFor();
    await b.shot('clouds');

    await page.getByRole('link', { name: 'Hosts and targets' }).click();
    await page.getByRole('button', { name: 'Create join token' }).click();
    const command = await page.getByRole('textbox', { name: 'Join command' }).inputValue();
    assert.match(command, /djt_/);
    assert.ok(command.includes(s.url), command);
    await page.getByRole('button', { name: 'Copy join command' }).waitFor();
    const cli = await page.getByRole('textbox', { name: 'Install command' }).inputValue();
    assert.ok(cli.startsWith(`curl -fsSL ${s.url}/svc-linux-`), cli);
    await b.shot('hosts');
  });
});
