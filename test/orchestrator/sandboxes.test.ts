import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { forEachDialect } from '../support/server.ts';
import { deploy, env, type World, world } from './harness.ts';

forEachDialect('sandboxes', (dialect) => {
  let w: World;
  before(async () => {
    w = await world(dialect);
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  test('image form: one container in project sandboxes (created on demand), 201 once healthy', async () => {
    const r = await w.t.req('POST', '/v1/sandboxes', {
      body: { image: 'python:3.12-slim', cmd: ['sleep', 'infinity'], env: { A: '1' } },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(Object.keys(r.body).sort(), ['deployment', 'environment']);
    assert.equal(r.body.environment.Name, 'sbx-1');
    assert.equal(r.body.environment.Status, 'running');
    assert.equal(r.body.deployment.Status, 'succeeded');
    const create = w.sc.commands('env.create').at(-1)!.payload as any;
    assert.equal(create.services.length, 1);
    assert.equal(create.services[0].image, 'python:3.12-slim');
    assert.deepEqual(create.services[0].env, { A: '1' });
    assert.deepEqual(create.volumes, ['work']);
    assert.equal(create.egress, 'deny');
    const projects = (await w.t.req('GET', '/v1/projects')).body.projects;
    const sbx = projects.find((p: any) => p.Name === 'sandboxes');
    assert.ok(sbx);
    const second = await w.t.req('POST', '/v1/sandboxes', { body: { image: 'python:3.12-slim' } });
    assert.equal(second.body.environment.Name, 'sbx-2');
    const envs = (await w.t.req('GET', `/v1/projects/sandboxes/envs`)).body.environments.map(
      (e: any) => e.Name,
    );
    assert.deepEqual(envs.sort(), ['alpha', 'sbx-1', 'sbx-2']);
  });

  test('from_version form forks the whole stack; bad bodies are 400 and change nothing', async () => {
    const d = await deploy(w);
    const r = await w.t.req('POST', '/v1/sandboxes', {
      body: { from_version: d.deployment.VersionID, name: 'ep-1' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.deployment.Kind, 'fork');
    assert.equal(r.body.environment.Stage, 'fork');
    assert.equal(r.body.environment.Name, 'ep-1');
    for (const body of [
      {},
      { image: 'a', from_version: d.deployment.VersionID },
      { image: 'Bad Image!' },
      { image: 'busybox', ports: ['8080'] },
      { image: 'busybox', egress: 'maybe' },
      { image: 'busybox', env: { A: 1 } },
      { image: 'busybox', timeout_sec: 0 },
    ]) {
      const bad = await w.t.req('POST', '/v1/sandboxes', { body });
      assert.equal(bad.status, 400, `${JSON.stringify(body)} → ${JSON.stringify(bad.body)}`);
      assert.equal(typeof bad.body.error, 'string');
    }
    assert.equal(
      (await w.t.req('POST', '/v1/sandboxes', { body: { from_version: 'ver_nope' } })).status,
      404,
    );
    assert.equal(
      (await w.t.req('POST', '/v1/sandboxes', { body: { image: 'busybox', project: 'nope' } })).status,
      404,
    );
  });

  test('a failed sandbox is a 502; one that is not healthy in time is a 504', async () => {
    w.sc.handlers['env.create'] = () => {
      throw new Error('no such image');
    };
    const bad = await w.t.req('POST', '/v1/sandboxes', { body: { image: 'nope:1' } });
    delete w.sc.handlers['env.create'];
    assert.equal(bad.status, 502);
    assert.match(bad.body.error, /prepare: no such image/);
    w.sc.handlers['env.create'] = () =>
      new Promise((r) =>
        setTimeout(
          () => r({ endpoints: {}, started_in: 1, digests: {}, storage: 'dir', egress: 'denied (verified)' }),
          1500,
        ),
      );
    const slow = await w.t.req('POST', '/v1/sandboxes', { body: { image: 'slow:1', timeout_sec: 1 } });
    delete w.sc.handlers['env.create'];
    assert.equal(slow.status, 504);
    assert.match(slow.body.error, /did not become healthy within 1 s/);
  });

  test('target sandboxes: 404 for an unknown cloud, 400 for the fork form, placed on the cloud', async () => {
    assert.equal(
      (await w.t.req('POST', '/v1/targets/nowhere/sandboxes', { body: { image: 'busybox' } })).status,
      404,
    );
    const c = await w.t.req('POST', '/v1/clouds', { body: { provider: 'manual', name: 'lab' } });
    assert.equal(c.status, 201);
    const fork = await w.t.req('POST', '/v1/targets/lab/sandboxes', { body: { from_version: 'ver_x' } });
    assert.equal(fork.status, 400);
    // No sidecar joined through this cloud: the pinned placement fails with the spec's message.
    const none = await w.t.req('POST', '/v1/targets/lab/sandboxes', { body: { image: 'busybox' } });
    assert.equal(none.status, 502);
    assert.match(none.body.error, /place: target 'lab' \(manual\): no connected host/);
    const jt = await w.t.req('POST', '/v1/join-tokens', { body: { cloud_id: c.body.cloud.ID } });
    const { FakeSidecar } = await import('../support/fake-sidecar.ts');
    const labHost = await new FakeSidecar(w.t.url).connect(jt.body.token);
    const ok = await w.t.req('POST', '/v1/targets/lab/sandboxes', { body: { image: 'busybox' } });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.environment.HostID, labHost.hostId);
    assert.ok(ok.body.target);
    assert.equal((await env(w.t, ok.body.environment.ID)).HostID, labHost.hostId);
    await labHost.close();
  });
});
