// Host records on a hello: a host is asked for its capabilities (host.report) and they are
// recorded, unless its hello carried the capabilities already recorded (a known host coming back,
// as every host of a dead replica does on a survivor at once): then nothing is asked or written.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { dbTarget, forEachDialect } from '../../test/support/server.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { bootstrap } from '../identity/store.ts';
import type { Dispatcher } from './dispatcher.ts';
import { HostRecords } from './host-records.ts';
import type { HostHello } from './hub-events.ts';
import { getHostRow, insertHost } from './store.ts';

forEachDialect('host records on hello', (dialect) => {
  let db: Db;
  let cleanup = () => {};
  let hostId: string;
  const asked: string[] = [];
  const dispatcher = {
    run: async (target: { hostId: string }, _env: string, kind: string) => {
      asked.push(`${target.hostId} ${kind}`);
      return { capabilities: { hostname: 'reported' } };
    },
  } as unknown as Dispatcher;
  const hello = (capabilitiesRecorded: boolean): HostHello => ({
    hostId,
    teamId: '',
    cloudId: '',
    capabilities: { hostname: 'said' },
    capabilitiesRecorded,
    send: () => true,
    current: () => true,
  });

  before(async () => {
    const t = await dbTarget(dialect);
    cleanup = t.cleanup;
    ({ db } = await openDb(t.target));
    const teamId = (await bootstrap(db, 'default', ''))?.team.ID as string;
    hostId = (
      await insertHost(db, { teamId, name: 'h', status: 'connected', capabilities: { hostname: 'said' } })
    ).ID;
  });
  after(async () => {
    await db.close();
    cleanup();
  });

  test('capabilities already recorded: no host.report, nothing written', async () => {
    const records = new HostRecords(db, dispatcher, { warn: () => {} });
    await records.connected(hello(true));
    assert.deepEqual(asked, []);
    assert.equal((await getHostRow(db, hostId))?.capabilities, JSON.stringify({ hostname: 'said' }));
  });

  test('otherwise the host is asked and its report recorded', async () => {
    const records = new HostRecords(db, dispatcher, { warn: () => {} });
    await records.connected(hello(false));
    assert.deepEqual(asked, [`${hostId} host.report`]);
    assert.equal((await getHostRow(db, hostId))?.capabilities, JSON.stringify({ hostname: 'reported' }));
  });
});
