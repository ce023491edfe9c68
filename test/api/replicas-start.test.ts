// Several control-plane replicas started at the same moment on one fresh Postgres database: every
// one starts (migrations and the first team are set up once, by whichever comes first), and the
// bootstrap key works on each of them.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { parseConfig } from '../../server/config/config.ts';
import { openDb } from '../../server/db/open.ts';
import type { PostgresDb } from '../../server/db/postgres.ts';
import { bootstrap } from '../../server/identity/store.ts';
import { startServer } from '../../server/main.ts';
import { dbTarget } from '../support/server.ts';
import { tier } from '../support/tiers.ts';

test('three replicas starting together on one fresh Postgres all start, with one first team', {
  skip: tier('postgres'),
}, async () => {
  const { target } = await dbTarget('postgres');
  const key = `dak_test${randomBytes(16).toString('hex')}`;
  const env = {
    SVC_BOOTSTRAP_KEY: key,
    SVC_SECRETS_KEY: randomBytes(32).toString('base64'),
    SVC_REPLICA_LEASE: '4',
    SVC_DB_POOL: '4',
  };
  const started = await Promise.allSettled(
    [0, 1, 2].map((i) =>
      startServer(
        parseConfig(['-addr', '127.0.0.1:0', '-db', target], {
          ...env,
          SVC_REPLICA_PEER_URL: `http://r${i}:8080`,
        }),
        {
          logger: false,
          announce: () => {},
        },
      ),
    ),
  );
  const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  try {
    assert.deepEqual(
      started.flatMap((s) => (s.status === 'rejected' ? [String(s.reason)] : [])),
      [],
      'every replica started',
    );
    for (const s of servers) {
      const r = await fetch(`${s.url}/v1/projects`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(r.status, 200);
    }
    const teams = await servers[0].ctx.db.all('SELECT id FROM teams');
    assert.equal(teams.length, 1);
    // SVC_REPLICA_LEASE sets each replica's lease and heartbeat; the table says where peers reach it.
    for (const s of servers) {
      assert.deepEqual({ ...s.ctx.cluster.replica.timing }, { leaseMs: 4000, heartbeatMs: 800 });
      // SVC_DB_POOL bounds each replica's connections to Postgres.
      assert.equal((s.ctx.db as PostgresDb).poolSize, 4);
    }
    const urls = await servers[0].ctx.db.all<{ url: string }>('SELECT url FROM replicas ORDER BY url');
    assert.deepEqual(
      urls.map((r) => r.url),
      ['http://r0:8080', 'http://r1:8080', 'http://r2:8080'],
    );
  } finally {
    await Promise.all(servers.map((s) => s.close()));
  }
});

test('replicas setting up the first team at the same moment create it once', {
  skip: tier('postgres'),
}, async () => {
  const { target } = await dbTarget('postgres');
  const opened = await Promise.all([0, 1, 2].map(() => openDb(target)));
  try {
    for (let round = 0; round < 3; round++) {
      if (round > 0) await opened[0].db.run('DELETE FROM api_keys');
      if (round > 0) await opened[0].db.run('DELETE FROM teams');
      const made = await Promise.all(opened.map((o) => bootstrap(o.db, 'default', '')));
      assert.equal(made.filter(Boolean).length, 1, `round ${round}: one replica made the first team`);
      assert.equal((await opened[0].db.all('SELECT id FROM teams')).length, 1);
    }
  } finally {
    await Promise.all(opened.map((o) => o.db.close()));
  }
});
