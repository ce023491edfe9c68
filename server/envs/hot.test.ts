// The exec hot path's environment rows: a change through the store is seen by the
// very next read (destroy, redeploy, rename, inside a transaction or not), a rolled-back change
// is not, and another team's environment is never handed out.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { createTeam } from '../identity/store.ts';
import { insertProject } from '../projects/store.ts';
import { getEnvHot, insertEnv, renameEnv, updateEnv } from './store.ts';

forEachDialect('hot environment rows', (dialect) => {
  let db: Db;
  let cleanup = () => {};
  let teamId = '';
  let projectId = '';
  before(async () => {
    const t = await dbTarget(dialect);
    cleanup = t.cleanup;
    ({ db } = await openDb(t.target));
    teamId = (await createTeam(db, 'hot')).ID;
    projectId = (await insertProject(db, teamId, 'hot', 'agent', '')).ID;
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  test('every change through the store is seen by the next read', async () => {
    const env = await insertEnv(db, { projectId, teamId, name: 'a', stage: 'alpha', status: 'running' });
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Status, 'running');
    await updateEnv(db, env.ID, { currentVersionId: 'ver_2', hostId: 'host_2' });
    const redeployed = await getEnvHot(db, teamId, env.ID);
    assert.deepEqual([redeployed?.CurrentVersionID, redeployed?.HostID], ['ver_2', 'host_2']);
    await renameEnv(db, env.ID, 'b');
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Name, 'b');
    await db.transaction((tx) => updateEnv(tx, env.ID, { status: 'destroying' }));
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Status, 'destroying');
    await updateEnv(db, env.ID, { status: 'destroyed' });
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Status, 'destroyed');
  });

  test('a rolled-back change is not seen; a read waiting on the transaction sees what committed', async () => {
    const env = await insertEnv(db, { projectId, teamId, name: 'c', stage: 'alpha', status: 'running' });
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Status, 'running');
    let reading: Promise<unknown> = Promise.resolve();
    await assert.rejects(
      db.transaction(async (tx) => {
        await updateEnv(tx, env.ID, { status: 'destroyed' });
        reading = getEnvHot(db, teamId, env.ID);
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    assert.equal(((await reading) as { Status: string } | undefined)?.Status, 'running');
    assert.equal((await getEnvHot(db, teamId, env.ID))?.Status, 'running');
  });

  test("another team's environment and an unknown id are not found", async () => {
    const env = await insertEnv(db, { projectId, teamId, name: 'd', stage: 'alpha', status: 'running' });
    assert.ok(await getEnvHot(db, teamId, env.ID));
    assert.equal(await getEnvHot(db, 'team_other', env.ID), undefined);
    assert.equal(await getEnvHot(db, teamId, 'env_nope'), undefined);
  });
});
