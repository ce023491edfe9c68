// GET /v1/envs/{env}/lineage: what an environment was forked from, up the chain, in one answer
// (the console's environment page reads it instead of walking the chain request by request).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { LINEAGE_MAX_DEPTH } from '../../protocol/api.ts';
import { otherTeam } from '../support/api.ts';
import type { FakeSidecar } from '../support/fake-sidecar.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { AGENT_COMPOSE, finished, joinFake } from './harness.ts';

forEachDialect('lineage', (dialect) => {
  let t: TestServer;
  let sc: FakeSidecar;
  let alpha: string;
  let v1: string;
  before(async () => {
    t = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
    sc = await joinFake(t);
    const p = await t.req('POST', '/v1/projects', { body: { name: 'lineage' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    alpha = p.body.environments[0].ID;
    const d = await t.req('POST', '/v1/projects/lineage/deploy', { body: { compose: AGENT_COMPOSE } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    v1 = (await finished(t, d.body.deployment.ID)).deployment.VersionID;
  });
  after(async () => {
    await sc.close();
    await t.close();
  });

  /** Forks `env` at its current version; the new environment's id. */
  const fork = async (env: string, name: string) => {
    const r = await t.req('POST', `/v1/envs/${env}/fork`, { body: { name } });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    assert.equal((await finished(t, r.body.deployment.ID)).deployment.Status, 'succeeded');
    return r.body.deployment.EnvID as string;
  };
  /** Snapshots `env`; the new version's id. */
  const snapshot = async (env: string) => {
    const r = await t.req('POST', `/v1/envs/${env}/snapshot`, { body: {} });
    assert.equal(r.status, 202, JSON.stringify(r.body));
    const done = await finished(t, r.body.deployment.ID);
    assert.equal(done.deployment.Status, 'succeeded');
    return done.deployment.VersionID as string;
  };
  const lineage = async (env: string) => {
    const r = await t.req('GET', `/v1/envs/${env}/lineage`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body.ancestors as { environment: { ID: string }; version: { ID: string } }[]).map((a) => [
      a.environment.ID,
      a.version.ID,
    ]);
  };

  test('an environment that is no fork has no ancestors', async () => {
    assert.deepEqual(await lineage(alpha), []);
  });

  test('a fork of a fork: each ancestor with the version forked from it, nearest first', async () => {
    const child = await fork(alpha, 'child');
    assert.deepEqual(await lineage(child), [[alpha, v1]]);
    const v2 = await snapshot(child);
    const grandchild = await fork(child, 'grandchild');
    assert.deepEqual(await lineage(grandchild), [
      [child, v2],
      [alpha, v1],
    ]);
  });

  test("a fork of a fork still on its source's snapshot comes from the environment that holds it", async () => {
    const unsnapped = await fork(alpha, 'unsnapped');
    const r = await t.req('GET', `/v1/envs/${await fork(unsnapped, 'from-unsnapped')}/lineage`);
    assert.deepEqual(
      r.body.ancestors.map((a: any) => [a.environment.Name, a.version.Number]),
      [['alpha', 1]],
    );
  });

  test(`the chain stops after ${LINEAGE_MAX_DEPTH} ancestors`, async () => {
    let env = alpha;
    for (let i = 0; i <= LINEAGE_MAX_DEPTH; i++) {
      env = await fork(env, `deep-${i}`);
      await snapshot(env);
    }
    const got = await lineage(env);
    assert.equal(got.length, LINEAGE_MAX_DEPTH);
    const names = (await t.req('GET', `/v1/envs/${env}/lineage`)).body.ancestors.map(
      (a: any) => a.environment.Name,
    );
    assert.deepEqual(names.slice(0, 2), [`deep-${LINEAGE_MAX_DEPTH - 1}`, `deep-${LINEAGE_MAX_DEPTH - 2}`]);
  });

  test("another team's environment, or one that does not exist, is a 404", async () => {
    const child = await fork(alpha, 'for-tenancy');
    const other = await otherTeam(t, 'lineage-other@example.com');
    const r = await t.req('GET', `/v1/envs/${child}/lineage`, { token: other.key });
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, { error: `environment ${child} not found` });
    assert.equal((await t.req('GET', '/v1/envs/env_nope/lineage')).status, 404);
  });
});
