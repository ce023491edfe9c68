// The operator's runtime policy (SVC_GVISOR_TEAMS): a named team's spec that asks for runc is a 400
// that records nothing; one that leaves the runtime out is recorded as gvisor, and placement sends
// it only to a host that runs gvisor (none here, so the place phase says so). Image sandboxes and
// E2B creates (metadata `svc.runtime`, through the real `e2b` SDK) take the same choice; a team
// that is not named deploys runc as before.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Sandbox } from 'e2b';
import { NO_GVISOR_HOST } from '../../server/deployments/placement.ts';
import { finished } from '../e2e/real.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const compose = (tail: string) => `services:\n  app:\n    image: busybox:1\n${tail}`;

forEachDialect('runtime policy', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer(dialect, {
      SVC_GVISOR_TEAMS: 'someone-else, default',
      SVC_E2B_ADDR: '127.0.0.1:0',
    });
    assert.equal((await t.req('POST', '/v1/projects', { body: { name: 'p' } })).status, 201);
  });
  after(() => t?.close());

  test('a spec asking for runc is refused with the reason, and nothing is recorded', async () => {
    const before = await t.req('GET', '/v1/deployments');
    const r = await t.req('POST', '/v1/projects/p/deploy', {
      body: { compose: compose('x-svc.runtime: runc\n') },
    });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(
      r.body.error,
      /must run environments under gvisor .*SVC_GVISOR_TEAMS.*asks for x-svc.runtime: runc/,
    );
    assert.deepEqual((await t.req('GET', '/v1/deployments')).body, before.body);
    const sbx = await t.req('POST', '/v1/sandboxes', { body: { image: 'busybox:1', runtime: 'runc' } });
    assert.equal(sbx.status, 400, JSON.stringify(sbx.body));
    assert.match(sbx.body.error, /must run environments under gvisor/);
  });

  test('a spec that leaves the runtime out is recorded as gvisor and placed only on a gvisor host', async () => {
    const r = await t.req('POST', '/v1/projects/p/deploy', { body: { compose: compose('') } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const out = await finished(t, r.body.deployment.ID);
    const versions = await t.req('GET', `/v1/envs/${out.deployment.EnvID}/versions`);
    assert.equal(versions.body.versions.at(-1).Spec.runtime, 'gvisor');
    assert.equal(out.deployment.Status, 'failed');
    assert.equal(out.deployment.Error, `place: ${NO_GVISOR_HOST}`);
  });

  test('an E2B create asking for runc in its metadata is refused; one naming none is recorded as gvisor', async () => {
    const url = t.server.e2b?.url ?? '';
    const opts = { apiUrl: url, sandboxUrl: url, apiKey: t.key, requestTimeoutMs: 60_000 };
    const envs = () => t.server.ctx.db.all<{ id: string }>('SELECT id FROM environments');
    const before = await envs();
    await assert.rejects(
      Sandbox.create('busybox:1', { ...opts, metadata: { 'svc.runtime': 'runc' } }),
      /must run environments under gvisor .*asks for runtime runc/,
    );
    await assert.rejects(
      Sandbox.create('busybox:1', { ...opts, metadata: { 'svc.runtime': 'kata' } }),
      /svc\.runtime must be runc or gvisor/,
    );
    assert.deepEqual(await envs(), before, 'a refused create records nothing');
    // No host runs gvisor here: the create fails at placement, after recording the spec.
    await assert.rejects(Sandbox.create('busybox:1', opts));
    const spec = await t.server.ctx.db.get<{ spec: string }>(
      'SELECT spec FROM versions ORDER BY created_at DESC',
    );
    assert.equal(JSON.parse(spec?.spec ?? '{}').runtime, 'gvisor');
  });

  test('a sandbox runtime other than runc or gvisor is a 400', async () => {
    const r = await t.req('POST', '/v1/sandboxes', { body: { image: 'busybox:1', runtime: 'kata' } });
    assert.equal(r.status, 400, JSON.stringify(r.body));
  });
});

forEachDialect('no runtime policy', (dialect) => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer(dialect, { SVC_GVISOR_TEAMS: 'someone-else' });
    await t.req('POST', '/v1/projects', { body: { name: 'p' } });
  });
  after(() => t?.close());

  test('a team that is not named deploys runc, recorded as asked', async () => {
    const r = await t.req('POST', '/v1/projects/p/deploy', {
      body: { compose: compose('x-svc.runtime: runc\n') },
    });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    await finished(t, r.body.deployment.ID); // no host: it fails after recording the version
    const versions = await t.req('GET', `/v1/envs/${r.body.deployment.EnvID}/versions`);
    assert.equal(versions.body.versions.at(-1).Spec.runtime, 'runc');
  });
});
