// Sign-in through the code host in the browser: the console's "Sign in with your code host" link
// goes through the provider (a local GitHub stand-in) and the callback back to the console, which
// keeps the session, takes the #token fragment out of the address and shows the user's projects.
// The only other origin the browser talks to is the provider's own sign-in page.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FakeGitHub } from '../support/fakes/github.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { type ConsoleBrowser, openBrowser, sessionOf } from './browser.ts';

describe('console: sign-in through the code host', { skip: tier('browser') }, () => {
  let s: TestServer;
  let gh: FakeGitHub;
  let b: ConsoleBrowser;
  before(async () => {
    gh = await new FakeGitHub().start();
    s = await startTestServer('sqlite', gh.env());
    b = await openBrowser(s.url);
  });
  after(async () => {
    // The provider's authorize page is the one other origin a code-host sign-in must visit.
    const provider = new URL(gh.url).origin;
    b.foreign.splice(0, b.foreign.length, ...b.foreign.filter((u) => new URL(u).origin !== provider));
    await b?.close();
    await s?.close();
    await gh?.close();
  });

  test('the link signs in at the provider and lands on the projects, token out of the address', async () => {
    const { page } = b;
    await page.goto(`${s.url}/app/`);
    await page.getByRole('link', { name: 'Sign in with your code host' }).click();
    await page.getByRole('heading', { name: 'Projects', level: 1 }).waitFor();
    assert.ok(!page.url().includes('token'), page.url());
    assert.equal(new URL(page.url()).hash, '');
    const token = await sessionOf(page);
    assert.match(token, /^dst_/);
    const me = await s.req('GET', '/v1/me', { token });
    assert.equal(me.body.user.Login, 'octocat');
    assert.equal(gh.calls('POST', '/login/oauth/access_token').length, 1);
    await b.shot('codehost-sign-in');
  });
});
