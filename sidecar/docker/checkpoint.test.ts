// Database checkpoints on real Postgres and Redis (svc-test/pgredis): after a checkpoint the
// files in the dataset directories hold what was written, and a checkpoint that fails says why.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages, PGREDIS_IMAGE } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { checkpointDatabases, detectDatabases, SAVE_SCRIPT } from './checkpoint.ts';
import { CheckpointError } from './errors.ts';
import { cleanupTestEnvs, svc, type TestEnv, testEnv } from './testing.ts';

const skip = tier('docker');

describe('checkpoint', { skip }, () => {
  let env: TestEnv;
  const psql = async (sql: string, db = 'app') => {
    const r = await env.stack.engine.exec('pg', ['psql', '-X', '-U', 'svc', '-d', db, '-Atc', sql], {
      user: 'postgres',
    });
    assert.equal(r.exit_code, 0, r.stderr);
    return r.stdout.trim();
  };
  const redis = async (...args: string[]) => {
    const r = await env.stack.engine.exec('cache', ['redis-cli', ...args]);
    assert.equal(r.exit_code, 0, r.stderr);
    return r.stdout.trim();
  };
  /** Redis reaps a finished save at its next cron tick; a BGSAVE before that is refused. */
  const saveReaped = async () => {
    for (
      let i = 0;
      i < 100 && !(await redis('INFO', 'persistence')).includes('rdb_bgsave_in_progress:0');
      i++
    )
      await new Promise((r) => setTimeout(r, 20));
  };
  const heapFile = async () => `${env.paths.pgdata}/${await psql("SELECT pg_relation_filepath('t')")}`;
  const redoLocation = async () => {
    const r = await env.stack.engine.exec('pg', ['pg_controldata'], { user: 'postgres' });
    return /REDO location:\s*(\S+)/.exec(r.stdout)?.[1];
  };

  before(async () => {
    await ensureTestImages({ postgres: true });
    env = await testEnv('ckpt', {
      egress: 'deny',
      volumes: ['pgdata', 'rdata'],
      services: [
        svc('pg', PGREDIS_IMAGE, {
          command: ['postgres'],
          env: { POSTGRES_USER: 'svc', POSTGRES_DB: 'app' },
          volumes: ['pgdata:/var/lib/postgresql/data'],
          health: { test: ['CMD-SHELL', 'pg_isready -U svc -d app'], interval: '1s', retries: 120 },
        }),
        svc('cache', PGREDIS_IMAGE, {
          command: ['redis'],
          volumes: ['rdata:/data'],
          health: { test: ['CMD-SHELL', 'redis-cli ping | grep -q PONG'], interval: '1s', retries: 60 },
        }),
        svc('box', BUSYBOX_IMAGE),
        // A database behind a shell that does not exec it: found among the main process's children.
        svc('wrapped', PGREDIS_IMAGE, {
          entrypoint: ['sh', '-c'],
          command: ['redis-server --port 6390 --dir /tmp & wait'],
        }),
      ],
    });
    await env.stack.up(300);
  });
  after(cleanupTestEnvs);

  it('detects the databases by what their containers run, not by image name', async () => {
    const found = (await detectDatabases(env.stack.engine, env.stack.spec.services)).map((d) => [
      d.service,
      d.kind,
    ]);
    assert.deepEqual(found, [
      ['pg', 'postgres'],
      ['cache', 'redis'],
      ['wrapped', 'redis'],
    ]);
    const wrapped = (await detectDatabases(env.stack.engine, env.stack.spec.services)).find(
      (d) => d.service === 'wrapped',
    );
    assert.equal(wrapped?.port, 6390, 'the port comes from the process title');
  });

  it('after a checkpoint the data files hold the rows and keys just written', async () => {
    await psql(
      "CREATE TABLE t (v text); INSERT INTO t SELECT 'svc-marker-' || g FROM generate_series(1, 50) g",
    );
    await redis('SET', 'ckptkey1', 'ckptval1');
    assert.equal(existsSync(`${env.paths.rdata}/dump.rdb`), false, 'the server saves nothing on its own');
    const redoBefore = await redoLocation();

    const results = await checkpointDatabases(env.stack.engine, env.stack.spec.services);
    assert.deepEqual(
      results.map((r) => [r.service, r.kind, r.detail]),
      [
        ['pg', 'postgres', 'CHECKPOINT as svc'],
        ['cache', 'redis', 'BGSAVE'],
        ['wrapped', 'redis', 'BGSAVE'],
      ],
    );
    assert.notEqual(await redoLocation(), redoBefore, 'a checkpoint moved the redo location');
    assert.ok(readFileSync(await heapFile()).includes('svc-marker-42'));
    const dump = readFileSync(`${env.paths.rdata}/dump.rdb`);
    assert.ok(dump.includes('ckptkey1') && dump.includes('ckptval1'));
  });

  it('a second checkpoint right after the first captures the newer writes', async () => {
    await psql("INSERT INTO t VALUES ('svc-second-marker')");
    await redis('SET', 'ckptkey2', 'ckptval2');
    await checkpointDatabases(env.stack.engine, env.stack.spec.services);
    assert.ok(readFileSync(await heapFile()).includes('svc-second-marker'));
    assert.ok(readFileSync(`${env.paths.rdata}/dump.rdb`).includes('ckptkey2'));
  });

  it('a save is seen done when the dump is replaced, or by INFO where the shell cannot look', async () => {
    await redis('SET', 'ckptkey4', 'ckptval4');
    const seen = await env.stack.engine.exec('cache', ['sh', '-c', SAVE_SCRIPT, 'sh', '3000', 'redis-cli']);
    assert.equal(seen.exit_code, 0, seen.stderr);
    assert.equal(seen.stdout, 'svc-renamed\n', 'the dump was replaced: no wait for the cron tick');
    assert.ok(readFileSync(`${env.paths.rdata}/dump.rdb`).includes('ckptkey4'));
    // The save ends while INFO is on its way: the save is slowed down (0.1 s a key, Redis's own
    // debug setting) and INFO answers 1.5 s late, so the first look misses the new dump and INFO
    // finds the save reaped. The replaced dump still decides, not INFO.
    await redis('SET', 'ckptkey5', 'ckptval5');
    await saveReaped();
    await redis('CONFIG', 'SET', 'rdb-key-save-delay', '100000');
    try {
      const slowInfo = ['sh', '-c', 'case $1 in INFO) sleep 1.5;; esac; exec redis-cli "$@"', 'cli'];
      const late = await env.stack.engine.exec('cache', ['sh', '-c', SAVE_SCRIPT, 'sh', '3000', ...slowInfo]);
      assert.equal(late.exit_code, 0, late.stderr);
      assert.equal(late.stdout, 'svc-renamed\n', 'a dump replaced while INFO was asked');
    } finally {
      await redis('CONFIG', 'SET', 'rdb-key-save-delay', '0');
    }
    assert.ok(readFileSync(`${env.paths.rdata}/dump.rdb`).includes('ckptkey5'));
    // Without `ls` the shell cannot see the dump: INFO decides, and says the save went well.
    await saveReaped();
    const info = await env.stack.engine.exec(
      'cache',
      ['/usr/bin/sh', '-c', SAVE_SCRIPT, 'sh', '3000', '/usr/bin/redis-cli'],
      { env: { PATH: '/nonexistent' } },
    );
    assert.equal(info.exit_code, 0, info.stderr);
    assert.match(info.stdout, /rdb_bgsave_in_progress:0/);
    assert.match(info.stdout, /rdb_last_bgsave_status:ok/);
  });

  it('a Redis image without a shell is saved step by step from svcd, with the same result', async () => {
    await redis('SET', 'ckptkey3', 'ckptval3');
    await env.stack.engine.exec('cache', ['mv', '/usr/bin/sh', '/usr/bin/sh.off'], { user: '0' });
    try {
      const results = await checkpointDatabases(env.stack.engine, env.stack.spec.services);
      assert.deepEqual(
        results.filter((r) => r.service === 'cache').map((r) => r.detail),
        ['BGSAVE, polled from svcd'],
      );
    } finally {
      await env.stack.engine.exec('cache', ['mv', '/usr/bin/sh.off', '/usr/bin/sh'], { user: '0' });
    }
    assert.ok(readFileSync(`${env.paths.rdata}/dump.rdb`).includes('ckptkey3'));
  });

  it('a Redis that cannot save fails the checkpoint with the reason', async () => {
    await env.stack.engine.exec('cache', ['chmod', '555', '/data'], { user: '0' });
    try {
      await assert.rejects(checkpointDatabases(env.stack.engine, env.stack.spec.services), (err: unknown) => {
        assert.ok(err instanceof CheckpointError);
        assert.match(err.message, /checkpoint of redis service 'cache': BGSAVE status err/);
        return true;
      });
    } finally {
      await env.stack.engine.exec('cache', ['chmod', '755', '/data'], { user: '0' });
    }
  });

  it('a Postgres that refuses connections fails the checkpoint with psql’s message', async () => {
    await psql('ALTER DATABASE postgres ALLOW_CONNECTIONS false', 'template1');
    await psql('ALTER DATABASE app ALLOW_CONNECTIONS false', 'template1');
    await assert.rejects(checkpointDatabases(env.stack.engine, env.stack.spec.services), (err: unknown) => {
      assert.ok(err instanceof CheckpointError);
      assert.match(
        err.message,
        /checkpoint of postgres service 'pg': CHECKPOINT failed: .*not currently accepting connections/s,
      );
      return true;
    });
  });
});
