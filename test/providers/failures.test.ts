// Provider failures and timeouts: a provider's error, 5xx or silence fails the phase with the
// provider's own message; no call waits unbounded; a sandbox that fails to start is not leaked.
import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';
import { LIMITS } from '../../server/providers/http.ts';
import { START_WAIT } from '../../server/providers/sandbox-b.ts';
import { FakeCloud } from '../support/fakes/cloud.ts';
import type { FakeSandboxA } from '../support/fakes/sandbox-a.ts';
import type { FakeSandboxB } from '../support/fakes/sandbox-b.ts';
import { BUSYBOX_IMAGE } from '../support/images.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { connectTarget, finished, phase, serverWithFakes } from './harness.ts';

// test-images: named only (every sandbox and deploy here fails at the provider before a container runs).
const defaults = { callMs: LIMITS.callMs, start: { ...START_WAIT } };

forEachDialect('hosted provider failures', (dialect) => {
  let t: TestServer;
  let a: FakeSandboxA;
  let b: FakeSandboxB;
  let close: () => Promise<void>;
  before(async () => {
    ({ t, a, b, close } = await serverWithFakes(dialect));
    await connectTarget(t, {
      provider: 'sandbox-a',
      token: a.token,
      config: { api_url: a.url, envd_url: a.url },
    });
    await connectTarget(t, { provider: 'sandbox-b', token: b.token, config: { api_url: b.url } });
  });
  afterEach(() => {
    LIMITS.callMs = defaults.callMs;
    Object.assign(START_WAIT, defaults.start);
    a.faults.clear();
    b.faults.clear();
    b.start = 'normal';
  });
  after(() => close());

  const sandbox = (target: string) =>
    t.req('POST', `/v1/targets/${target}/sandboxes`, { body: { image: BUSYBOX_IMAGE } });

  test("a provider 5xx fails prepare with the provider's own message", async () => {
    a.faults.add({
      method: 'POST',
      path: '/sandboxes',
      status: 500,
      body: { code: 500, message: 'template build failed' },
    });
    const r = await sandbox('sandbox-a');
    assert.equal(r.status, 502);
    assert.match(r.body.error, /: prepare: sandbox-a: POST \/sandboxes: 500 template build failed$/);
    b.faults.add({
      method: 'POST',
      path: '/sandbox',
      status: 503,
      body: { statusCode: 503, message: 'no runners available', error: 'Service Unavailable' },
    });
    const rb = await sandbox('sandbox-b');
    assert.equal(rb.status, 502);
    assert.match(rb.body.error, /: prepare: sandbox-b: POST \/sandbox: 503 no runners available$/);
  });

  test('a provider that never answers fails the phase at the call deadline', async () => {
    LIMITS.callMs = 1000;
    a.faults.add({ method: 'POST', path: '/sandboxes', status: 'hang' });
    const r = await sandbox('sandbox-a');
    assert.equal(r.status, 502);
    assert.match(r.body.error, /: prepare: sandbox-a: POST \/sandboxes: no answer within 1 s$/);
    const rows = await t.server.ctx.db.all<{ kind: string; status: string; error: string }>(
      "SELECT kind, status, error FROM commands WHERE kind = 'env.create' ORDER BY created_at DESC LIMIT 1",
    );
    assert.equal(rows[0].status, 'failed', 'the command row records the failure');
    assert.match(rows[0].error, /no answer within 1 s/);
  });

  test('a sandbox that never starts fails at the start wait and is deleted, not leaked', async () => {
    START_WAIT.ms = 1500;
    START_WAIT.pollMs = 100;
    b.start = 'never';
    const r = await sandbox('sandbox-b');
    assert.equal(r.status, 502);
    assert.match(
      r.body.error,
      /prepare: sandbox-b: sandbox [0-9a-f-]{36} not started within 2 s \(state creating\)$/,
    );
    assert.equal(b.sandboxes.size, 0, 'the stuck sandbox was deleted');
    b.start = { error: 'image pull failed: manifest unknown' };
    const e = await sandbox('sandbox-b');
    assert.match(
      e.body.error,
      /prepare: sandbox-b: sandbox [0-9a-f-]{36} is error: image pull failed: manifest unknown$/,
    );
    assert.equal(b.sandboxes.size, 0);
  });

  test('a refused token later (revoked at the provider) fails with the 401 message', async () => {
    a.faults.add({
      method: 'POST',
      path: '/sandboxes',
      status: 401,
      body: { code: 401, message: 'Invalid API key' },
    });
    const r = await sandbox('sandbox-a');
    assert.match(r.body.error, /prepare: sandbox-a: POST \/sandboxes: 401 Invalid API key$/);
  });
});

forEachDialect('cloudvm failures', (dialect) => {
  let t: TestServer;
  let cloud: FakeCloud;
  before(async () => {
    cloud = await new FakeCloud().listen();
    cloud.boots = false;
    t = await startTestServer(dialect);
    const c = await t.req('POST', '/v1/clouds', {
      body: { provider: 'cloudvm', config: { token: cloud.token, api_url: cloud.url } },
    });
    assert.equal(c.status, 201);
    await t.req('POST', '/v1/projects', { body: { name: 'p' } });
  });
  afterEach(() => {
    LIMITS.callMs = defaults.callMs;
    cloud.faults.clear();
  });
  after(async () => {
    await t.close();
    await cloud.close();
  });

  const deploy = async () => {
    const compose = `services:\n  app: { image: ${BUSYBOX_IMAGE} }\n`;
    const r = await t.req('POST', '/v1/projects/p/deploy', { body: { compose } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    return finished(t, r.body.deployment.ID);
  };

  test("the cloud's 5xx and refusals fail provision with its message", async () => {
    cloud.faults.add({
      method: 'POST',
      path: '/servers',
      status: 503,
      body: { error: { code: 'resource_unavailable', message: 'server type cpx31 is unavailable in nbg1' } },
    });
    const d = await deploy();
    assert.equal(d.deployment.Status, 'failed');
    assert.equal(
      d.deployment.Error,
      'provision: cloudvm: POST /servers: 503 server type cpx31 is unavailable in nbg1',
    );
    assert.equal(phase(d.phases, 'join').Status, 'skipped');
    LIMITS.callMs = 1000;
    cloud.faults.add({ method: 'POST', path: '/servers', status: 'hang' });
    const h = await deploy();
    assert.equal(h.deployment.Error, 'provision: cloudvm: POST /servers: no answer within 1 s');
  });

  test('a machine that never joins fails the join phase at its wait', async () => {
    t.server.orchestrator.engine.deps.joinWaitMs = 1500;
    try {
      const d = await deploy();
      assert.equal(phase(d.phases, 'provision').Status, 'ok');
      assert.equal(d.deployment.Error, 'join: no host joined within 2 s');
      assert.deepEqual(phase(d.phases, 'verdict').Evidence, { reverted: 'no previous version' });
    } finally {
      t.server.orchestrator.engine.deps.joinWaitMs = 6 * 60_000;
    }
  });
});
