// Warm pools against the fake sidecar: members fork in the background and stay out of
// listings, a claim hands one out at once and the pool refills, 20 concurrent claims never share
// a member, and a new version (or DELETE) destroys the members.
import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { deploy, usingWorld, type World, waitFor } from '../../test/orchestrator/harness.ts';
import { forEachDialect } from '../../test/support/server.ts';
import { CLAIM_QUIET_MS, MAX_POOL_SIZE } from './pool.ts';

forEachDialect('warm pool', (dialect) => {
  const world = usingWorld(dialect);
  let w: World;
  before(() => {
    w = world();
  });

  const pool = async (ver: string) => (await w.t.req('GET', `/v1/versions/${ver}/pool`)).body.pool;
  const forked = () => new Set(w.sc.commands('env.fork').map((f) => f.env_id as string));
  const destroyed = () => new Set(w.sc.commands('env.destroy').map((f) => f.env_id as string));
  const listed = async () =>
    (await w.t.req('GET', `/v1/projects/${w.project}/envs`)).body.environments.map(
      (e: any) => e.ID as string,
    );
  const ready = (ver: string, n: number) => waitFor(async () => (await pool(ver))?.ready === n);

  test('fills in the background with members hidden from listings; a claim hands one out and the pool refills', async () => {
    const ver = (await deploy(w)).deployment.VersionID;
    const set = await w.t.req('POST', `/v1/versions/${ver}/pool`, { body: { size: 3 } });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.pool.size, 3);
    await ready(ver, 3);
    const members = forked();
    assert.equal(members.size, 3);
    for (const id of members) assert.ok(!(await listed()).includes(id), 'members are not listed');

    const claimedBy = Date.now();
    const r = await w.t.req('POST', '/v1/sandboxes', { body: { from_version: ver, name: 'ep-1' } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.ok(members.has(r.body.environment.ID), 'the sandbox is a pool member');
    assert.equal(r.body.environment.Name, 'ep-1');
    assert.equal(r.body.environment.Status, 'running');
    assert.equal(r.body.deployment.Kind, 'fork');
    assert.equal(r.body.deployment.Status, 'succeeded');
    assert.ok((await listed()).includes(r.body.environment.ID), 'a claimed member is listed');
    await ready(ver, 3);
    assert.equal(forked().size, 4, 'one fork replaced the claimed member');
    // The replacement waited out the claim's quiet window: the sandbox's first commands came first.
    const [replacement] = [...forked()].filter((id) => !members.has(id));
    const made = (await w.t.req('GET', `/v1/envs/${replacement}`)).body.environment.CreatedAt as string;
    assert.ok(
      Date.parse(made) >= claimedBy + CLAIM_QUIET_MS,
      `refill forked at ${made}, within ${CLAIM_QUIET_MS} ms of the claim`,
    );
    // Members wait paused; the claimed one was thawed before it was handed out.
    const paused = w.sc.commands('env.pause').map((f) => f.env_id);
    const thawed = w.sc.commands('env.unpause').map((f) => f.env_id);
    for (const id of members) assert.ok(paused.includes(id), `${id} was paused`);
    assert.deepEqual(thawed, [r.body.environment.ID]);
  });

  test('20 concurrent claims on a pool of 5: every sandbox is a different environment', async () => {
    const ver = (await deploy(w)).deployment.VersionID;
    await w.t.req('POST', `/v1/versions/${ver}/pool`, { body: { size: 5 } });
    await ready(ver, 5);
    const before = forked();
    const rs = await Promise.all(
      // Named: concurrent default names (sbx-<n>) race in the cold fork path, which is not under test.
      Array.from({ length: 20 }, (_, i) =>
        w.t.req('POST', '/v1/sandboxes', { body: { from_version: ver, name: `c-${i}` } }),
      ),
    );
    for (const r of rs) assert.equal(r.status, 201, JSON.stringify(r.body));
    const ids = rs.map((r) => r.body.environment.ID as string);
    assert.equal(new Set(ids).size, 20, 'no member handed out twice');
    assert.equal(new Set(rs.map((r) => r.body.environment.Name)).size, 20, 'names are distinct');
    const fromPool = ids.filter((id) => before.has(id)).length;
    assert.ok(fromPool >= 1 && fromPool <= 5, `${fromPool} came from the pool`);
  });

  test('a new version destroys the old version’s members and its pool; DELETE does too', async () => {
    const v1 = (await deploy(w)).deployment.VersionID;
    await w.t.req('POST', `/v1/versions/${v1}/pool`, { body: { size: 2 } });
    await ready(v1, 2);
    const shown = await listed();
    const members = [...forked()].filter((id) => !destroyed().has(id) && !shown.includes(id));
    assert.equal(members.length, 2);
    const v2 = (await deploy(w)).deployment.VersionID;
    assert.notEqual(v2, v1);
    await waitFor(async () => (await w.t.req('GET', `/v1/versions/${v1}/pool`)).status === 404);
    await waitFor(() => members.every((id) => destroyed().has(id)));
    const stale = await w.t.req('POST', `/v1/versions/${v1}/pool`, { body: { size: 1 } });
    assert.equal(stale.status, 409, 'only the current version can be pooled');

    await w.t.req('POST', `/v1/versions/${v2}/pool`, { body: { size: 1 } });
    await ready(v2, 1);
    const del = await w.t.req('DELETE', `/v1/versions/${v2}/pool`);
    assert.equal(del.status, 200);
    assert.equal((await w.t.req('GET', `/v1/versions/${v2}/pool`)).status, 404);
    const last = [...forked()].at(-1) as string;
    await waitFor(() => destroyed().has(last));
  });

  test('bad sizes are 400 and change nothing', async () => {
    const ver = (await deploy(w)).deployment.VersionID;
    for (const size of [-1, MAX_POOL_SIZE + 1, 1.5, 'two'])
      assert.equal((await w.t.req('POST', `/v1/versions/${ver}/pool`, { body: { size } })).status, 400);
    assert.equal((await w.t.req('GET', `/v1/versions/${ver}/pool`)).status, 404);
  });
});
