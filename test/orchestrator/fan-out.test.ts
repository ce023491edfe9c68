// Fan-out (`count` on POST /v1/envs/{env}/fork and POST /v1/sandboxes) against a fake sidecar:
// one snapshot, N fork deployments, each its own environment; one failing clone fails only itself.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Frame } from '../../protocol/frames.ts';
import { assertError, otherTeam } from '../support/api.ts';
import { forEachDialect } from '../support/server.ts';
import { AGENT_COMPOSE, deploy, env, finished, type World, waitFor, world } from './harness.ts';

forEachDialect('fan-out', (dialect) => {
  let w: World;
  let v1: string;
  let snap: string;
  before(async () => {
    w = await world(dialect, {}, 'p1', { SVC_DEV_LOGIN: '1' });
    const d = await deploy(w, AGENT_COMPOSE);
    v1 = d.deployment.VersionID;
    snap = d.phases.find((p: any) => p.Name === 'snapshot').Evidence.snapshot;
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  /** The clone of the `n`th env.fork (1-based) from now on fails; the others succeed. */
  function failNth(n: number): () => void {
    let seen = 0;
    w.sc.handlers['env.fork'] = () => {
      seen++;
      if (seen === n) throw new Error('injected: clone refused');
      return { forked_in: 7, endpoints: {} };
    };
    return () => delete w.sc.handlers['env.fork'];
  }

  test('count 3: three forks of the one snapshot, each its own environment and deployment', async () => {
    const forksBefore = w.sc.commands('env.fork').length;
    const snapshotsBefore = w.sc.commands('env.snapshot').length;
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { count: 3 } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.deepEqual(Object.keys(r.body).sort(), ['fanout', 'forks', 'snapshot', 'version']);
    assert.match(r.body.fanout, /^fan_/);
    assert.equal(r.body.version, v1);
    assert.equal(r.body.snapshot, snap);
    assert.equal(r.body.forks.length, 3);
    const names = r.body.forks.map((f: any) => f.environment.Name);
    assert.deepEqual(names, ['alpha-fork-1', 'alpha-fork-2', 'alpha-fork-3']);
    const envIds = new Set(r.body.forks.map((f: any) => f.deployment.EnvID));
    assert.equal(envIds.size, 3);
    assert.ok(!envIds.has(w.alpha));
    for (const [i, f] of r.body.forks.entries()) {
      assert.equal(f.deployment.Kind, 'fork');
      assert.equal(f.environment.ID, f.deployment.EnvID);
      const done = await finished(w.t, f.deployment.ID);
      assert.equal(done.deployment.Status, 'succeeded', done.deployment.Error);
      const clone = done.phases.find((p: any) => p.Name === 'clone').Evidence;
      // The record: this fork cloned the one snapshot, as fork i of 3 of this fan-out.
      assert.equal(clone.from, snap);
      assert.deepEqual(clone.fanout, { id: r.body.fanout, index: i + 1, count: 3 });
      const e = await env(w.t, f.environment.ID);
      assert.equal(e.Stage, 'fork');
      assert.equal(e.Status, 'running');
      assert.equal(e.ParentVersionID, v1);
    }
    const sent = w.sc.commands('env.fork').slice(forksBefore) as Frame[];
    assert.equal(sent.length, 3);
    assert.deepEqual(new Set(sent.map((c) => c.env_id)), envIds);
    for (const c of sent) assert.equal((c.payload as any).from_snapshot, snap);
    assert.equal(
      w.sc.commands('env.snapshot').length,
      snapshotsBefore,
      'the source is not snapshotted again',
    );
  });

  test('without count the answer is exactly the single fork one', async () => {
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { name: 'single' } });
    assert.equal(r.status, 202);
    assert.deepEqual(Object.keys(r.body).sort(), ['deployment', 'phases']);
    const done = await finished(w.t, r.body.deployment.ID);
    const clone = done.phases.find((p: any) => p.Name === 'clone').Evidence;
    assert.deepEqual(Object.keys(clone).sort(), ['forked_in_ms', 'from']);
  });

  test('one failing clone fails only its own fork; the others are healthy', async () => {
    const restore = failNth(2);
    try {
      const r = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { count: 3, name: 'part' } });
      assert.equal(r.status, 202, JSON.stringify(r.body));
      const done = await Promise.all(r.body.forks.map((f: any) => finished(w.t, f.deployment.ID)));
      const statuses = done.map((d) => d.deployment.Status).sort();
      assert.deepEqual(statuses, ['failed', 'succeeded', 'succeeded']);
      const failed = done.find((d) => d.deployment.Status === 'failed')!;
      assert.match(failed.deployment.Error, /^clone: injected: clone refused/);
      assert.equal((await env(w.t, failed.deployment.EnvID)).Status, 'failed');
      // Only the failed fork is removed from the host.
      const destroyed = w.sc.commands('env.destroy').map((c) => c.env_id);
      assert.ok(destroyed.includes(failed.deployment.EnvID));
      for (const d of done.filter((x) => x.deployment.Status === 'succeeded')) {
        assert.ok(!destroyed.includes(d.deployment.EnvID));
        assert.equal((await env(w.t, d.deployment.EnvID)).Status, 'running');
      }
    } finally {
      restore();
    }
  });

  test('sandboxes with count: each healthy or with its own error, in one 201', async () => {
    const restore = failNth(3);
    try {
      const r = await w.t.req('POST', '/v1/sandboxes', { body: { from_version: v1, count: 3, name: 'ep' } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      assert.equal(r.body.snapshot, snap);
      assert.deepEqual(Object.keys(r.body).sort(), ['fanout', 'sandboxes', 'snapshot', 'version']);
      const all = r.body.sandboxes;
      assert.equal(all.length, 3);
      const ok = all.filter((x: any) => x.error === undefined);
      const bad = all.filter((x: any) => x.error !== undefined);
      assert.equal(ok.length, 2);
      for (const x of ok) {
        assert.equal(x.deployment.Status, 'succeeded');
        assert.equal(x.environment.Status, 'running');
      }
      assert.equal(bad.length, 1);
      const [c] = bad;
      assert.equal(c.status, 502);
      assert.match(c.error, /failed: clone: injected: clone refused/);
      assert.equal(c.deployment.Status, 'failed');
      assert.equal(c.environment.Name, c.name);
      // Answered in the order of the names, whichever clone failed.
      assert.deepEqual(
        all.map((x: any) => x.name ?? x.environment.Name),
        ['ep-1', 'ep-2', 'ep-3'],
      );
    } finally {
      restore();
    }
  });

  test('limits: count 0, 101, a fraction, on the image form or a target are 400 and create nothing', async () => {
    const before = (await w.t.req('GET', `/v1/projects/${w.project}/envs`)).body.environments.length;
    for (const count of [0, 101, 1.5, -1]) {
      const r = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { count } });
      assertError(r, 400, /count/);
      const s = await w.t.req('POST', '/v1/sandboxes', { body: { from_version: v1, count } });
      assertError(s, 400, /count/);
    }
    assertError(
      await w.t.req('POST', '/v1/sandboxes', { body: { image: 'busybox', count: 2 } }),
      400,
      'give from_version (not image) with count',
    );
    assertError(
      await w.t.req('POST', '/v1/targets/lab/sandboxes', { body: { from_version: v1, count: 2 } }),
      400,
      'target sandbox takes the image form only',
    );
    // A name whose numbered forks would be too long is refused before anything is created.
    const long = 'n'.repeat(62);
    assertError(await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { count: 2, name: long } }), 400);
    // One taken name refuses the whole request before anything is created.
    const taken = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { name: 'dup-2' } });
    assert.equal(taken.status, 202);
    await finished(w.t, taken.body.deployment.ID);
    assertError(
      await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { count: 3, name: 'dup' } }),
      409,
      'environment dup-2 already exists',
    );
    const after = (await w.t.req('GET', `/v1/projects/${w.project}/envs`)).body.environments.length;
    assert.equal(after, before + 1, 'only the one single fork was created');
  });

  test("another team's key gets 404 for the environment and the version, and nothing is forked", async () => {
    const other = await otherTeam(w.t, `fanout-${dialect}@example.com`);
    const forks = w.sc.commands('env.fork').length;
    assertError(
      await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { token: other.key, body: { count: 2 } }),
      404,
      `environment ${w.alpha} not found`,
    );
    assertError(
      await w.t.req('POST', '/v1/sandboxes', { token: other.key, body: { from_version: v1, count: 2 } }),
      404,
      `version ${v1} not found`,
    );
    assert.equal(w.sc.commands('env.fork').length, forks);
  });

  test('sandboxes with count hand out ready warm-pool members first, then fork the rest', async () => {
    const set = await w.t.req('POST', `/v1/versions/${v1}/pool`, { body: { size: 1 } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    await waitFor(async () => (await w.t.req('GET', `/v1/versions/${v1}/pool`)).body.pool?.ready === 1);
    try {
      const r = await w.t.req('POST', '/v1/sandboxes', { body: { from_version: v1, count: 3, name: 'wp' } });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      const [warm, ...cold] = r.body.sandboxes;
      assert.deepEqual(
        r.body.sandboxes.map((x: any) => x.environment.Name),
        ['wp-1', 'wp-2', 'wp-3'],
      );
      assert.equal(warm.deployment.Params.fanout, undefined, 'the first is the pool member');
      for (const [i, x] of cold.entries()) {
        assert.equal(x.environment.Status, 'running');
        assert.deepEqual(x.deployment.Params.fanout, { id: r.body.fanout, index: i + 1, count: 2 });
      }
    } finally {
      await w.t.req('DELETE', `/v1/versions/${v1}/pool`);
    }
  });
});
