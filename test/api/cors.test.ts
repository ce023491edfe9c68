// Cross-origin behaviour: the headers themselves, and a real browser reading the API from a
// console origin (allowed only with SVC_CONSOLE_URL naming that origin).
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { ALLOW_HEADERS, ALLOW_METHODS } from '../../server/http/cors.ts';
import { assertError } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { CHROMIUM, tier } from '../support/tiers.ts';

const CONSOLE = 'https://console.example.com';
const CORS_HEADERS = [
  'access-control-allow-origin',
  'access-control-allow-headers',
  'access-control-allow-methods',
  'access-control-max-age',
];

function assertNoCors(h: Headers, what: string): void {
  for (const name of CORS_HEADERS) assert.equal(h.get(name), null, `${what}: unexpected ${name}`);
}

function assertCors(h: Headers, origin: string, what: string): void {
  assert.equal(h.get('access-control-allow-origin'), origin, what);
  assert.equal(h.get('access-control-allow-headers'), 'Authorization, Content-Type, X-Svc-Team', what);
  assert.equal(h.get('access-control-allow-methods'), 'GET, POST, PUT, DELETE, OPTIONS', what);
  assert.equal(h.get('access-control-max-age'), '600', what);
}

forEachDialect('CORS headers', (dialect) => {
  let withConsole: TestServer;
  let without: TestServer;
  before(async () => {
    withConsole = await startTestServer(dialect, { SVC_CONSOLE_URL: CONSOLE, SVC_DEV_LOGIN: '1' });
    without = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(async () => {
    await withConsole.close();
    await without.close();
  });

  test('the constants are the spec text', () => {
    assert.equal(ALLOW_HEADERS, 'Authorization, Content-Type, X-Svc-Team');
    assert.equal(ALLOW_METHODS, 'GET, POST, PUT, DELETE, OPTIONS');
  });

  test('with SVC_CONSOLE_URL: the console and loopback origins get the headers on /v1/* and /auth/*', async () => {
    for (const origin of [CONSOLE, 'http://localhost:5173', 'http://localhost', 'http://127.0.0.1:8080']) {
      const r = await withConsole.req('GET', '/v1/me', { headers: { origin } });
      assert.equal(r.status, 200);
      assertCors(r.headers, origin, origin);
    }
    // Errors carry them too, so the console can read a 401 or a 404.
    const denied = await withConsole.req('GET', '/v1/me', { token: false, headers: { origin: CONSOLE } });
    assertError(denied, 401);
    assertCors(denied.headers, CONSOLE, '401');
    const missing = await withConsole.req('GET', '/v1/envs/env_nope', { headers: { origin: CONSOLE } });
    assertCors(missing.headers, CONSOLE, '404');
    const login = await withConsole.req('POST', '/auth/dev-login', {
      token: false,
      body: { email: 'cors@example.com' },
      headers: { origin: 'http://localhost:3000' },
    });
    assertCors(login.headers, 'http://localhost:3000', '/auth/dev-login');
  });

  test('with SVC_CONSOLE_URL: preflights on /v1/* and /auth/* answer 204', async () => {
    for (const path of ['/v1/projects', '/v1/envs/env_x/files', '/auth/dev-login', '/auth/codehost/start']) {
      const r = await fetch(`${withConsole.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: CONSOLE,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type, x-svc-team',
        },
      });
      assert.equal(r.status, 204, path);
      assertCors(r.headers, CONSOLE, path);
    }
  });

  test('with SVC_CONSOLE_URL: other origins and other paths get nothing', async () => {
    for (const origin of [
      'https://evil.example.com',
      'http://localhost.evil.com',
      'https://localhost:3000',
      'http://127.0.0.1.nip.io',
      'https://console.example.com.evil.com',
      'null',
    ]) {
      const r = await withConsole.req('GET', '/v1/me', { headers: { origin } });
      assert.equal(r.status, 200, 'the request itself is still answered');
      assertNoCors(r.headers, origin);
    }
    for (const path of ['/health', '/openapi.json', '/svcd']) {
      const r = await withConsole.req('GET', path, { token: false, headers: { origin: CONSOLE } });
      assertNoCors(r.headers, path);
    }
    assertNoCors((await withConsole.req('GET', '/v1/me')).headers, 'no Origin');
  });

  test('without SVC_CONSOLE_URL: no CORS header, ever', async () => {
    for (const origin of [CONSOLE, 'http://localhost:5173', 'http://127.0.0.1:1']) {
      const r = await without.req('GET', '/v1/me', { headers: { origin } });
      assert.equal(r.status, 200);
      assertNoCors(r.headers, origin);
      const pre = await fetch(`${without.url}/v1/me`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'GET' },
      });
      assert.notEqual(pre.status, 204);
      assertNoCors(pre.headers, `preflight from ${origin}`);
    }
  });
});

/** A "console": one static page on a loopback port, reached in the browser as http://console.test:<port>. */
async function consoleSite(): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => {
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end('<!doctype html><title>console</title><p>console</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe('CORS in a real browser', { skip: tier('browser') }, () => {
  let browser: Browser;
  let site: { server: Server; port: number };
  before(async () => {
    site = await consoleSite();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Chromium refuses its sandbox as root; console.test must resolve without a DNS server.
      args: [
        ...(process.getuid?.() === 0 ? ['--no-sandbox'] : []),
        '--host-resolver-rules=MAP console.test 127.0.0.1',
      ],
    });
  });
  after(async () => {
    await browser?.close();
    site?.server.close();
  });

  /** Loads the console page and fetches GET /v1/me on the API with an Authorization header. */
  async function fetchFromConsole(
    api: TestServer,
    pageOrigin: string,
  ): Promise<{ ok: boolean; team?: string; error?: string }> {
    const page = await browser.newPage();
    try {
      await page.goto(`${pageOrigin}/`);
      return await page.evaluate(
        async ({ url, key }) => {
          try {
            const r = await fetch(`${url}/v1/me`, {
              headers: { Authorization: `Bearer ${key}`, 'X-Svc-Team': 'any' },
            });
            const body = (await r.json()) as { team?: { Name: string } };
            return { ok: r.ok, team: body.team?.Name };
          } catch (err) {
            return { ok: false, error: String(err) };
          }
        },
        { url: api.url, key: api.key },
      );
    } finally {
      await page.close();
    }
  }

  for (const dialect of ['sqlite', 'postgres'] as const) {
    test(`[${dialect}] allowed with SVC_CONSOLE_URL = the page's origin, blocked otherwise`, {
      skip: dialect === 'postgres' ? tier('postgres') : false,
    }, async () => {
      const origin = `http://console.test:${site.port}`;
      const allowed = await startTestServer(dialect, { SVC_CONSOLE_URL: origin });
      const none = await startTestServer(dialect);
      const elsewhere = await startTestServer(dialect, { SVC_CONSOLE_URL: 'http://other-console.test:1' });
      try {
        assert.deepEqual(await fetchFromConsole(allowed, origin), { ok: true, team: 'default' });
        const blocked = await fetchFromConsole(none, origin);
        assert.equal(blocked.ok, false);
        assert.match(blocked.error ?? '', /Failed to fetch/);
        const wrong = await fetchFromConsole(elsewhere, origin);
        assert.equal(wrong.ok, false);
        assert.match(wrong.error ?? '', /Failed to fetch/);
        // A local development console (http://localhost:<port>) is allowed whenever CORS is on.
        assert.deepEqual(await fetchFromConsole(elsewhere, `http://localhost:${site.port}`), {
          ok: true,
          team: 'default',
        });
        assert.match(
          (await fetchFromConsole(none, `http://localhost:${site.port}`)).error ?? '',
          /Failed to fetch/,
        );
      } finally {
        await Promise.all([allowed.close(), none.close(), elsewhere.close()]);
      }
    });
  }
});
