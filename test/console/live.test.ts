// The console's live pages in real Chromium on the real control plane with a fake sidecar:
// a deployment page follows a deploy to its end without a reload, an environment page
// shows versions and a fork's lineage, and the page can read nothing from another origin.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { appendEvent } from '../../server/events/store.ts';
import { defaultHandlers, FakeSidecar } from '../support/fake-sidecar.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { type ConsoleBrowser, devLogin, openBrowser, sessionOf } from './browser.ts';

const T = { timeout: 120_000 };
const COMPOSE = `
services:
  app:
    image: busybox:latest
    command: ["sleep", "infinity"]
    volumes: [data:/data]
volumes: { data: {} }
`;

/** Waits on a deployment page until the deployment has finished; it must have succeeded. */
async function finishedOk(page: Page): Promise<void> {
  const status = page.getByRole('definition').getByText(/^(succeeded|failed|rolled_back)$/);
  await status.waitFor();
  const error = await page
    .getByRole('definition')
    .filter({ has: page.locator('.error') })
    .allInnerTexts();
  assert.equal(await status.innerText(), 'succeeded', error.join(' '));
}

describe('console: live deployment, environment lineage, same origin only', { skip: tier('browser') }, () => {
  let s: TestServer;
  let b: ConsoleBrowser;
  let sc: FakeSidecar;
  let session: string;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' });
    b = await openBrowser(s.url);
    await devLogin(b.page, s.url, 'live@example.com');
    await b.page.getByRole('heading', { name: 'Projects', level: 1 }).waitFor();
    session = await sessionOf(b.page);
    // The user's own team gets a host (the fake sidecar, joined with a real join token) and a project.
    const jt = await s.req('POST', '/v1/join-tokens', { token: session, body: {} });
    assert.equal(jt.status, 201, JSON.stringify(jt.body));
    sc = await new FakeSidecar(s.url).connect(jt.body.token);
    assert.equal(
      (await s.req('POST', '/v1/projects', { token: session, body: { name: 'live' } })).status,
      201,
    );
  });
  after(async () => {
    try {
      await b?.close();
    } finally {
      await sc?.close();
      await s?.close();
    }
  });

  test('the deployment page follows a deploy to its end without a reload', T, async () => {
    const { page } = b;
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    sc.handlers['env.create'] = async (f, me) => {
      await gate;
      return defaultHandlers['env.create'](f, me);
    };
    const r = await s.req('POST', '/v1/projects/live/deploy', { token: session, body: { compose: COMPOSE } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const id = r.body.deployment.ID as string;

    await page.goto(`${s.url}/app/deployment/?id=${id}`);
    await page.getByRole('heading', { name: `Deployment ${id}`, level: 1 }).waitFor();
    await page.getByRole('row', { name: /^prepare\s+running/ }).waitFor();
    await page.getByRole('row', { name: /^resolve\s+ok/ }).waitFor();
    const events = page.getByRole('list', { name: 'Events' });
    await events.getByText('deployment.started').waitFor();
    assert.equal(await events.getByText('deployment.finished').count(), 0);
    await b.shot('deployment-running');
    await page.evaluate('window.notReloaded = true');
    let navigations = 0;
    page.on('framenavigated', (f) => {
      if (f === page.mainFrame()) navigations++;
    });

    release();
    await page.getByRole('row', { name: /^ingress\s+(ok|skipped)/ }).waitFor();
    const status = page.getByRole('definition').filter({ hasText: /^(succeeded|failed|running)$/ });
    await status.getByText('succeeded').waitFor();
    for (const phase of ['resolve', 'place', 'prepare', 'start', 'health', 'snapshot']) {
      await page.getByRole('row', { name: new RegExp(`^${phase}\\s+ok`) }).waitFor();
    }
    // Evidence is on the page: prepare's version, place's host.
    await page
      .getByRole('row', { name: /^place\s+ok/ })
      .getByText(sc.hostId)
      .waitFor();
    // deployment.finished arrived over the event stream (the list is only read again on a reconnect).
    await events.getByText('deployment.finished').waitFor();
    assert.equal(await page.evaluate('window.notReloaded'), true, 'the page was not reloaded');
    assert.equal(navigations, 0);
    await b.shot('deployment');
    delete sc.handlers['env.create'];
  });

  test("the environment page shows versions and a fork's lineage", T, async () => {
    const { page } = b;
    const envs = (await s.req('GET', '/v1/projects/live/envs', { token: session })).body.environments;
    const alpha = envs.find((e: { Name: string }) => e.Name === 'alpha');
    await page.getByRole('link', { name: alpha.ID }).click();
    await page.getByRole('heading', { name: 'Environment alpha', level: 1 }).waitFor();
    await page.getByRole('rowheader', { name: '1 (current)' }).waitFor();
    await page.getByText('Not a fork.').waitFor();

    await page.getByLabel('Fork name (optional)').fill('alpha-fork');
    await page.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.getByRole('heading', { name: /^Deployment / }).waitFor();
    await page.getByRole('row', { name: /^clone\s+ok/ }).waitFor();
    await finishedOk(page);
    const forkId = (await page.getByRole('definition').getByRole('link').first().textContent()) as string;
    await page.getByRole('link', { name: forkId }).click();
    await page.getByRole('heading', { name: 'Environment alpha-fork', level: 1 }).waitFor();
    const lineage = page.getByRole('list', { name: 'Forked from' });
    await lineage.getByText('Forked from version 1 of alpha').waitFor();
    await page.getByRole('definition').getByText('1 of alpha').waitFor();
    await b.shot('env-fork');

    await lineage.getByRole('link', { name: 'alpha' }).click();
    await page.getByRole('heading', { name: 'Environment alpha', level: 1 }).waitFor();
    const v1 = page.getByRole('row', { name: /^1 \(current\)/ });
    await v1.getByRole('link', { name: 'alpha-fork' }).waitFor();
    await b.shot('env');

    // Destroy asks first; confirmed, it runs a destroy deployment and the fork is destroyed.
    await v1.getByRole('link', { name: 'alpha-fork' }).click();
    await page.getByRole('heading', { name: 'Environment alpha-fork', level: 1 }).waitFor();
    await page.getByRole('button', { name: 'Destroy environment' }).click();
    await page
      .getByRole('group', { name: 'Confirm destroy' })
      .getByRole('button', { name: 'Cancel' })
      .waitFor();
    await page.getByRole('button', { name: 'Destroy alpha-fork' }).click();
    await finishedOk(page);
    await page.getByRole('definition').getByText('destroy', { exact: true }).waitFor();
    await page.getByRole('definition').getByRole('link').first().click();
    await page.getByRole('definition').getByText('destroyed', { exact: true }).waitFor();
  });

  test('deploy from the project page (a template fills the form), snapshot and roll back', T, async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Projects' }).click();
    await page.getByRole('link', { name: 'live' }).click();
    await page.getByRole('heading', { name: 'Project live', level: 1 }).waitFor();
    const compose = page.getByLabel('Compose file');
    assert.equal(await compose.inputValue(), '');
    await page.getByLabel('Start from a template (optional)').selectOption({ index: 1 });
    assert.match(await compose.inputValue(), /services:/);
    await compose.fill(COMPOSE);
    await page.getByRole('button', { name: 'Deploy', exact: true }).click();
    await finishedOk(page);
    await page.getByRole('definition').getByRole('link').first().click();
    await page.getByRole('heading', { name: 'Environment alpha', level: 1 }).waitFor();
    await page.getByRole('rowheader', { name: '2 (current)' }).waitFor();

    await page.getByRole('button', { name: 'Snapshot' }).click();
    await finishedOk(page);
    await page.getByRole('definition').getByRole('link').first().click();
    await page.getByRole('rowheader', { name: '3 (current)' }).waitFor();
    await page.getByRole('button', { name: 'Roll back to version 1' }).click();
    await finishedOk(page);
    await page.getByRole('definition').getByText('rollback', { exact: true }).waitFor();
    await page.getByRole('definition').getByRole('link').first().click();
    await page.getByRole('rowheader', { name: '1 (current)' }).waitFor();
    await page.getByRole('button', { name: 'Roll back to version 3' }).waitFor();
  });

  test('hosts page lists the joined sidecar', T, async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Hosts and targets' }).click();
    await page.getByRole('rowheader', { name: new RegExp(sc.hostId) }).waitFor();
  });

  test("in the browser the event stream carries this team's events, never another's", T, async () => {
    const { page } = b;
    const stranger = await s.req('POST', '/auth/dev-login', {
      token: false,
      body: { email: 'stranger@example.com' },
    });
    const theirTeam = (await s.req('GET', '/v1/me', { token: stranger.body.token })).body.team.ID;
    const ours = (await s.req('GET', '/v1/me', { token: session })).body.team.ID;
    // The page reads the team-wide stream with its own session until it sees our marker event.
    const reading = page.evaluate(async () => {
      const token = localStorage.getItem('svc.session');
      const r = await fetch('/v1/events/stream', { headers: { authorization: `Bearer ${token}` } });
      const reader = (r.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
      let text = '';
      while (!text.includes('test.ours')) text += (await reader.read()).value ?? '';
      await reader.cancel();
      return text;
    });
    const db = s.server.ctx.db;
    // Whenever the page's stream opens, a round of "theirs, then ours" follows it: ours arriving
    // means theirs was written before it and had every chance to leak.
    let read = false;
    void reading.finally(() => {
      read = true;
    });
    while (!read) {
      await appendEvent(db, theirTeam, 'env:env_theirs', 'test.theirs', { secret: 1 }, s.server.ctx.events);
      await appendEvent(db, ours, 'env:env_ours', 'test.ours', {}, s.server.ctx.events);
      await new Promise((r) => setTimeout(r, 100));
    }
    const text = await reading;
    assert.match(text, /test\.ours/);
    assert.ok(!text.includes('test.theirs'), text);
    assert.ok(!text.includes(theirTeam), text);
  });

  test(
    'the console reads nothing from another origin: its policy refuses, the other server sees nothing',
    T,
    async () => {
      const { page } = b;
      let hits = 0;
      const other: Server = createServer((_req, res) => {
        hits++;
        res
          .writeHead(200, { 'access-control-allow-origin': '*', 'content-type': 'text/plain' })
          .end('secret');
      });
      await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
      const otherUrl = `http://127.0.0.1:${(other.address() as { port: number }).port}/`;
      try {
        const r = await page.goto(`${s.url}/app/`);
        assert.match(r?.headers()['content-security-policy'] ?? '', /connect-src 'self'/);
        const got = await page.evaluate(async (url) => {
          try {
            return `read: ${await (await fetch(url)).text()}`;
          } catch (err) {
            return `refused: ${String(err)}`;
          }
        }, otherUrl);
        assert.match(got, /^refused: /);
        assert.equal(hits, 0, 'no request reached the other origin');
        // Same origin, no credential: the event stream is 401 in the browser too.
        const status = await page.evaluate(async () => (await fetch('/v1/events/stream')).status);
        assert.equal(status, 401);
      } finally {
        other.close();
        // This test provoked the refusal on purpose; the session's watchers must not count it.
        b.errors.splice(0, b.errors.length, ...b.errors.filter((e) => !e.includes(otherUrl.slice(0, -1))));
        b.foreign.splice(0, b.foreign.length, ...b.foreign.filter((u) => !u.startsWith(otherUrl)));
      }
    },
  );
});
