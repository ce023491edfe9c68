// A Postgres + Redis + MariaDB stack on real Docker: the snapshot checkpoints all three
// (CHECKPOINT, BGSAVE, FLUSH TABLES with the root password from the service's environment), the
// data survives snapshot → write → rollback, and a fork of the snapshot is an independent copy.
// Under runc and under gVisor (the runtime matrix): under gVisor the databases are found in gVisor's
// own process table, as the host's /proc shows only the sandbox.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ensureTestImages, PGREDIS_IMAGE } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, type Real, startReal } from './real.ts';

// MariaDB's InnoDB uses io_uring, which this machine's gVisor does not offer (mariadbd aborts:
// "io_uring_wait_cqe() returned -1"): under gVisor it is told to use its own I/O threads.
const GVISOR_MARIADB = `entrypoint: ["sh", "-c", "f=/etc/mysql/mariadb.conf.d/99-gvisor.cnf; echo [mysqld] > $$f; echo innodb_use_native_aio=0 >> $$f; exec svc-entrypoint mysql"]`;

const stack = (runtime: string) => `
services:
  db:
    image: ${PGREDIS_IMAGE}
    command: [postgres]
    environment: {POSTGRES_USER: app, POSTGRES_DB: app}
    volumes: [pgdata:/var/lib/postgresql/data]
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U app -d app -h 127.0.0.1"]
      interval: 1s
      retries: 120
  cache:
    image: ${PGREDIS_IMAGE}
    command: [redis]
    volumes: [redisdata:/data]
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 1s
      retries: 120
  sql:
    image: ${PGREDIS_IMAGE}
    ${runtime === 'gvisor' ? GVISOR_MARIADB : 'command: [mysql]'}
    environment: {MARIADB_ROOT_PASSWORD: s3cret}
    volumes: [mysqldata:/var/lib/mysql]
    healthcheck:
      test: ["CMD", "mariadb-admin", "-uroot", "-ps3cret", "ping"]
      interval: 1s
      retries: 120
volumes: {pgdata: {}, redisdata: {}, mysqldata: {}}
x-svc.runtime: ${runtime}
`;

describe('Postgres, Redis and MariaDB data across snapshot, rollback and fork', {
  skip: tier('docker'),
}, async () => {
  const rows = tier('docker') ? [] : await runtimeRows();
  let r: Real;
  const sql = async (e: string, q: string) =>
    (
      await exec(r.t, e, 'db', ['psql', '-U', 'app', '-d', 'app', '-h', '127.0.0.1', '-tAc', q])
    ).stdout.trim();
  const redis = async (e: string, ...args: string[]) =>
    (await exec(r.t, e, 'cache', ['redis-cli', ...args])).stdout.trim();
  const maria = async (e: string, q: string) => {
    const out = await exec(r.t, e, 'sql', ['mariadb', '-uroot', '-ps3cret', '-N', '-e', q]);
    assert.equal(out.exit_code, 0, out.stderr);
    return out.stdout.trim();
  };
  before(async () => {
    await ensureTestImages({ postgres: true });
    r = await startReal();
  });
  after(async () => r?.close());

  for (const { runtime, skip } of rows)
    test(`under ${runtime}: snapshot checkpoints every database; rollback restores them; the fork stays independent`, {
      skip,
    }, async () => {
      const project = `data-${runtime}`;
      await r.t.req('POST', '/v1/projects', { body: { name: project } });
      const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
        body: { compose: stack(runtime) },
      });
      const out = await finished(r.t, d.body.deployment.ID);
      assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
      const env = out.deployment.EnvID;
      assert.equal(out.phases.find((p: any) => p.Name === 'prepare').Evidence.runtime, runtime);
      await sql(env, "CREATE TABLE t (v text); INSERT INTO t VALUES ('v1')");
      assert.equal(await sql(env, 'SELECT v FROM t'), 'v1');
      assert.equal(await redis(env, 'SET', 'k', 'v1'), 'OK');
      await maria(
        env,
        "CREATE DATABASE app; CREATE TABLE app.t (v varchar(8)); INSERT INTO app.t VALUES ('v1')",
      );
      const s = await r.t.req('POST', `/v1/envs/${env}/snapshot`);
      const snap = await finished(r.t, s.body.deployment.ID);
      assert.equal(snap.deployment.Status, 'succeeded', snap.deployment.Error);
      assert.equal(snap.phases[0].Evidence.consistent, true);
      assert.equal(snap.phases[0].Evidence.datasets.length, 3);
      const cmd = await r.t.server.ctx.db.get<{ id: string }>(
        "SELECT id FROM commands WHERE kind = 'env.snapshot' AND env_id = ? ORDER BY created_at DESC",
        [env],
      );
      const lines = (await r.t.req('GET', `/v1/events?subject=cmd:${cmd!.id}`)).body.events
        .map((e: any) => e.Body.message)
        .join('\n');
      assert.match(lines, /checkpointed postgres in db/);
      assert.match(lines, /checkpointed redis in cache/);
      assert.match(lines, /checkpointed mysql in sql \(FLUSH TABLES/);
      const v = snap.deployment.VersionID;

      await sql(env, "UPDATE t SET v = 'v2'");
      await redis(env, 'SET', 'k', 'v2');
      await maria(env, "UPDATE app.t SET v = 'v2'");
      const f = await r.t.req('POST', `/v1/envs/${env}/fork`, { body: { version: v, name: 'branch' } });
      const fork = await finished(r.t, f.body.deployment.ID);
      assert.equal(fork.deployment.Status, 'succeeded', fork.deployment.Error);
      const forkEnv = fork.deployment.EnvID;
      assert.equal(await sql(forkEnv, 'SELECT v FROM t'), 'v1');
      assert.equal(await redis(forkEnv, 'GET', 'k'), 'v1');
      assert.equal(await maria(forkEnv, 'SELECT v FROM app.t'), 'v1');
      await sql(forkEnv, "UPDATE t SET v = 'fork'");
      await redis(forkEnv, 'SET', 'k', 'fork');
      await maria(forkEnv, "UPDATE app.t SET v = 'fork'");
      assert.equal(await sql(env, 'SELECT v FROM t'), 'v2');
      assert.equal(await redis(env, 'GET', 'k'), 'v2');
      assert.equal(await maria(env, 'SELECT v FROM app.t'), 'v2');

      const rb = await r.t.req('POST', `/v1/envs/${env}/rollback`, { body: { version: v } });
      const back = await finished(r.t, rb.body.deployment.ID);
      assert.equal(back.deployment.Status, 'succeeded', back.deployment.Error);
      assert.equal(await sql(env, 'SELECT v FROM t'), 'v1');
      assert.equal(await redis(env, 'GET', 'k'), 'v1');
      assert.equal(await maria(env, 'SELECT v FROM app.t'), 'v1');
      assert.equal(await sql(forkEnv, 'SELECT v FROM t'), 'fork');
      assert.equal(await redis(forkEnv, 'GET', 'k'), 'fork');
      assert.equal(await maria(forkEnv, 'SELECT v FROM app.t'), 'fork');
    });
});
