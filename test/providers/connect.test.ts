// POST /v1/targets/connect: the token is checked with one read call at the provider; a refused
// token is a 400 naming the provider, an unreachable provider a 502, and neither records anything.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CAPABILITY_TABLE } from '../../server/clouds/providers.ts';
import { freePort } from '../cli/harness.ts';
import { assertError } from '../support/api.ts';
import type { FakeSandboxA } from '../support/fakes/sandbox-a.ts';
import type { FakeSandboxB } from '../support/fakes/sandbox-b.ts';
import { forEachDialect, type TestServer } from '../support/server.ts';
import { serverWithFakes } from './harness.ts';

// test-images: named only (harness.ts names busybox for other suites; connecting makes no sandbox).
/** A loopback port nothing listens on. */
forEachDialect('targets/connect', (dialect) => {
  let t: TestServer;
  let a: FakeSandboxA;
  let b: FakeSandboxB;
  let close: () => Promise<void>;
  before(async () => {
    ({ t, a, b, close } = await serverWithFakes(dialect));
  });
  after(() => close());

  const count = async () => (await t.req('GET', '/v1/clouds')).body.clouds.length;

  test('a refused token is a 400 naming the provider; nothing is recorded', async () => {
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-a', token: 'e2b_wrong', config: { api_url: a.url } },
      }),
      400,
      /^sandbox-a: the provider refused the token \(sandbox-a: GET \/sandboxes: 401 Invalid API key/,
    );
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-b', token: 'dtn_wrong', config: { api_url: `${b.url}/` } },
      }),
      400,
      'sandbox-b: the provider refused the token (sandbox-b: GET /sandbox: 401 Invalid credentials)',
    );
    b.faults.add({
      method: 'GET',
      path: '/sandbox',
      status: 403,
      body: { statusCode: 403, message: 'Forbidden resource' },
    });
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-b', token: b.token, config: { api_url: b.url } },
      }),
      400,
      'Forbidden resource',
    );
    assert.equal(await count(), 0);
    assert.equal((await t.req('GET', '/v1/targets')).body.targets.length, 0);
  });

  test('an unreachable provider, or one failing with 5xx, is a 502 with its reason', async () => {
    const port = await freePort();
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-a', token: 'x', config: { api_url: `http://127.0.0.1:${port}` } },
      }),
      502,
      /^sandbox-a: GET \/sandboxes: unreachable \(ECONNREFUSED\)$/,
    );
    a.faults.add({
      method: 'GET',
      path: '/sandboxes',
      status: 503,
      body: { code: 503, message: 'service unavailable, try later' },
    });
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-a', token: a.token, config: { api_url: a.url } },
      }),
      502,
      'sandbox-a: GET /sandboxes: 503 service unavailable, try later',
    );
    assert.equal(await count(), 0);
  });

  test('bad bodies are 400s: other providers, a missing token, unknown config keys', async () => {
    assertError(
      await t.req('POST', '/v1/targets/connect', { body: { provider: 'cloudvm', token: 'x' } }),
      400,
    );
    assertError(
      await t.req('POST', '/v1/targets/connect', { body: { provider: 'sandbox-a' } }),
      400,
      'config.token is required',
    );
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-b', token: 'x', config: { envd_url: 'http://x' } },
      }),
      400,
      "unknown config key 'envd_url'",
    );
  });

  test('a good token: 201 with cloud, driver host, info and the static capability row', async () => {
    for (const [provider, fake] of [
      ['sandbox-a', a],
      ['sandbox-b', b],
    ] as const) {
      const r = await t.req('POST', '/v1/targets/connect', {
        body: { provider, token: fake.token, config: { api_url: fake.url } },
      });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.deepEqual(Object.keys(r.body).sort(), ['capabilities', 'cloud', 'host', 'info']);
      assert.equal(r.body.cloud.Config.token, '\u2022\u2022\u2022');
      assert.equal(r.body.host.CloudID, r.body.cloud.ID);
      assert.equal(r.body.host.connected, true);
      assert.equal(r.body.info.api_url, fake.url);
      assert.deepEqual(r.body.capabilities, { provider, ...CAPABILITY_TABLE[provider] });
      assert.ok(!JSON.stringify(r.body).includes(fake.token));
    }
    const targets = (await t.req('GET', '/v1/targets')).body.targets;
    assert.deepEqual(
      targets.map((x: any) => [x.kind, x.Status, x.connected]),
      [
        ['driver:sandbox-a', 'connected', true],
        ['driver:sandbox-b', 'connected', true],
      ],
    );
    assert.deepEqual(targets[1].table, CAPABILITY_TABLE['sandbox-b']);
    assertError(
      await t.req('POST', '/v1/targets/connect', {
        body: { provider: 'sandbox-a', token: a.token, config: { api_url: a.url } },
      }),
      409,
      "a cloud named 'sandbox-a' already exists",
    );
  });
});
