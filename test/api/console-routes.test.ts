// The console's routes (server/console): every page path under /app/ answers the app's HTML with
// a same-origin-only content security policy, hashed assets are served with long caching, the
// sign-in methods follow the configuration, and the earlier /device link lands on the device page.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestServer, type TestServer } from '../support/server.ts';

describe('console routes', () => {
  let dev: TestServer;
  let codehost: TestServer;
  before(async () => {
    dev = await startTestServer('sqlite', { SVC_DEV_LOGIN: '1' });
    codehost = await startTestServer('sqlite', {
      SVC_CODEHOST_CLIENT_ID: 'id',
      SVC_CODEHOST_CLIENT_SECRET: 'secret',
      SVC_CONSOLE_URL: 'https://console.example.com',
    });
  });
  after(async () => {
    await dev.close();
    await codehost.close();
  });

  test('/app redirects to /app/; every page path answers the same HTML, without a credential', async () => {
    const bare = await fetch(`${dev.url}/app`, { redirect: 'manual' });
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get('location'), '/app/');
    const pages = [
      '/app/',
      '/app/device/?user_code=BCDF-GHJK',
      '/app/deployment/?id=dep_x',
      '/app/env/?id=e',
    ];
    const bodies = new Set<string>();
    const nonces = new Set<string>();
    for (const path of pages) {
      const r = await fetch(`${dev.url}${path}`);
      assert.equal(r.status, 200, path);
      assert.match(r.headers.get('content-type') ?? '', /^text\/html/);
      const csp = r.headers.get('content-security-policy') ?? '';
      for (const rule of [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
      ])
        assert.ok(csp.includes(rule), `${path}: ${rule} in ${csp}`);
      assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
      // Styles: the page's own, and elements carrying this response's nonce (the terminal's
      // theme), never any inline style; the nonce is on the stylesheet's link for the page to use.
      const nonce = /style-src 'self' 'nonce-([A-Za-z0-9+/]{22}==)'(;|$)/.exec(csp)?.[1];
      assert.ok(nonce, `${path}: a style nonce in ${csp}`);
      // Inline style only as attributes (the terminal's 24-bit colours), never as elements.
      assert.ok(!/style-src [^;]*unsafe-inline/.test(csp), csp);
      assert.match(csp, /style-src-attr 'unsafe-inline'/);
      nonces.add(nonce);
      const html = await r.text();
      assert.ok(html.includes(`<link rel="stylesheet" nonce="${nonce}"`), html);
      bodies.add(html.replace(nonce, ''));
    }
    assert.equal(nonces.size, pages.length, 'a fresh nonce for every response');
    assert.equal(bodies.size, 1);
    const html = [...bodies][0];
    assert.ok(!html.includes('BCDF-GHJK'), 'the query is never written into the page');
  });

  test('assets: the hashed script and stylesheet, cached for good; an unknown name is 404', async () => {
    const html = await (await fetch(`${dev.url}/app/`)).text();
    const names = [...html.matchAll(/\/app\/assets\/(app-[A-Z0-9]+\.(js|css))/g)].map((m) => m[1]);
    assert.equal(names.length, 2, html);
    for (const name of names) {
      const r = await fetch(`${dev.url}/app/assets/${name}`);
      assert.equal(r.status, 200, name);
      assert.match(
        r.headers.get('content-type') ?? '',
        name.endsWith('.js') ? /^text\/javascript/ : /^text\/css/,
      );
      assert.equal(r.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.ok((await r.arrayBuffer()).byteLength > 100);
    }
    const missing = await fetch(`${dev.url}/app/assets/app-NOPE.js`);
    assert.equal(missing.status, 404);
  });

  test('/app/config.json names the sign-in methods this server offers', async () => {
    assert.deepEqual(await (await fetch(`${dev.url}/app/config.json`)).json(), {
      dev_login: true,
      codehost_sign_in: false,
    });
    assert.deepEqual(await (await fetch(`${codehost.url}/app/config.json`)).json(), {
      dev_login: false,
      codehost_sign_in: true,
    });
  });

  test('/device?code= (earlier releases) redirects to the device page; not with another console', async () => {
    const r = await fetch(`${dev.url}/device?code=BCDF-GHJK`, { redirect: 'manual' });
    assert.equal(r.status, 302);
    assert.equal(r.headers.get('location'), '/app/device/?user_code=BCDF-GHJK');
    const plain = await fetch(`${dev.url}/device`, { redirect: 'manual' });
    assert.equal(plain.headers.get('location'), '/app/device/');
    assert.equal((await fetch(`${codehost.url}/device`, { redirect: 'manual' })).status, 404);
  });
});
