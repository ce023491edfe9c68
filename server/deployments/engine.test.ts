// The engine never loses a failure: a throw out of a run (a database error in a
// phase update or the verdict) ends the deployment `failed` with `engine: <message>`, appends
// `deployment.finished` and is logged; a phase at its time limit is cancelled, command and all.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Type } from '@sinclair/typebox';
import type { Frame } from '../../protocol/frames.ts';
import { watchAlive } from '../../test/support/alive.ts';
import { openDb } from '../db/open.ts';
import type { Db, Param } from '../db/types.ts';
import { listEvents } from '../events/store.ts';
import { CommandTargets } from '../hosts/command-target.ts';
import { Dispatcher } from '../hosts/dispatcher.ts';
import type { OrchestratorDeps } from './deps.ts';
import { DeploymentEngine, type KindDef } from './engine.ts';
import { getDeploymentAnyTeam, insertDeployment, listPhases } from './store.ts';

const TEAM = 'team_t';
const TARGET = { hostId: 'host_h', teamId: TEAM, kind: 'sidecar' };

/** The real database, except that statements matching `failing` throw (each match uses one of `times`). */
function faulty(db: Db) {
  const fault = { match: (_sql: string, _p: readonly Param[]) => false, times: 0, message: 'disk I/O error' };
  const check = (sql: string, p: readonly Param[] = []) => {
    if (fault.times > 0 && fault.match(sql, p)) {
      fault.times--;
      throw new Error(fault.message);
    }
  };
  const wrapped: Db = {
    dialect: db.dialect,
    all: async (sql, p) => {
      check(sql, p);
      return db.all(sql, p);
    },
    get: async (sql, p) => {
      check(sql, p);
      return db.get(sql, p);
    },
    run: async (sql, p) => {
      check(sql, p);
      return db.run(sql, p);
    },
    afterCommit: (fn) => db.afterCommit(fn),
    transaction: (fn) => db.transaction(fn),
    close: () => db.close(),
  };
  return { db: wrapped, fault };
}

describe('engine: no failure is lost', () => {
  let dir: string;
  let db: Db;
  let f: ReturnType<typeof faulty>;
  const logged: { level: string; msg: string; obj: object }[] = [];
  const written: Frame[] = [];
  let dispatcher: Dispatcher;
  let engine: DeploymentEngine;
  let phaseStopped = false;

  const kind: KindDef<unknown> = {
    kind: 'snapshot',
    params: Type.Object({ hang: Type.Optional(Type.Boolean()) }),
    phases: [
      { name: 'first', run: async () => ({ did: 'first' }) },
      {
        name: 'second',
        run: async (ctx) => {
          if (!ctx.params.hang) return { did: 'second' };
          try {
            return await ctx.deps.dispatcher.run(
              TARGET,
              ctx.dep.EnvID,
              'env.exec',
              { service: 'app', cmd: ['sleep', '1000'] },
              undefined,
              ctx.signal,
            );
          } finally {
            phaseStopped = true;
          }
        },
      },
    ],
    verdict: async (_ctx, failure) => ({ status: failure ? 'failed' : 'succeeded', evidence: null }),
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-engine-'));
    db = (await openDb(join(dir, 'svc.db'))).db;
    f = faulty(db);
    dispatcher = new Dispatcher(db);
    // The host's stream, as the hub's hello hands it over.
    dispatcher.connected({
      hostId: TARGET.hostId,
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (fr) => {
        written.push(fr);
        return true;
      },
      current: () => true,
    });
    const log = (level: string) => (obj: object, msg: string) => logged.push({ level, msg, obj });
    const deps: OrchestratorDeps = {
      db: f.db,
      log: { warn: log('warn'), error: log('error') },
      dispatcher,
      hub: {
        isConnected: () => true,
        waitForHost: async () => TARGET.hostId,
        waitConnected: async () => true,
      },
      targets: new CommandTargets(f.db, { isConnected: () => true }),
      provisioners: new Map(),
      mintJoinToken: async () => '',
      ensureDriverHosts: async () => {},
      publicUrl: 'http://127.0.0.1:1',
      sidecarUrl: 'http://127.0.0.1:1/svcd',
      joinWaitMs: 0,
    };
    engine = new DeploymentEngine(deps, [kind]);
  });
  after(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const submit = async (envId: string, params: Record<string, unknown> = {}) => {
    const { deployment } = await engine.submit(
      { teamId: TEAM, projectId: 'proj_p', envId, kind: 'snapshot', params },
      null,
    );
    const status = await engine.waitFinished(deployment.ID, 20_000);
    await engine.idle();
    return { id: deployment.ID, status };
  };

  const finishedEvents = async (id: string) =>
    (await listEvents(db, TEAM, `dep:${id}`)).filter((e) => e.Kind === 'deployment.finished');

  test('a database error in a phase update ends the deployment failed, with its event, and logs it', async () => {
    // The write that starts the first phase, outside any phase's own failure handling.
    f.fault.match = (sql, p) => sql.startsWith('UPDATE phases') && p.includes('running');
    f.fault.times = 1;
    const { id, status } = await submit('env_a');
    assert.equal(status, 'failed');
    const dep = await getDeploymentAnyTeam(db, id);
    assert.equal(dep?.Status, 'failed');
    assert.equal(dep?.Error, 'engine: disk I/O error');
    assert.ok(dep?.FinishedAt);
    const phases = await listPhases(db, id);
    assert.deepEqual(
      phases.map((p) => [p.Name, p.Status]),
      [
        ['first', 'skipped'],
        ['second', 'skipped'],
        ['verdict', 'skipped'],
      ],
    );
    const events = await finishedEvents(id);
    assert.equal(events.length, 1);
    assert.deepEqual((events[0].Body as { error: string }).error, 'engine: disk I/O error');
    assert.ok(logged.some((l) => l.level === 'error' && (l.obj as { deployment: string }).deployment === id));
  });

  test("a database error in the verdict's write ends the deployment failed", async () => {
    f.fault.match = (sql, p) => sql.startsWith('UPDATE deployments') && p.includes('succeeded');
    f.fault.times = 1;
    const { id, status } = await submit('env_b');
    assert.equal(status, 'failed');
    const dep = await getDeploymentAnyTeam(db, id);
    assert.deepEqual([dep?.Status, dep?.Error], ['failed', 'engine: disk I/O error']);
    assert.equal((await finishedEvents(id)).length, 1);
    // The environment's queue moved on: the next deployment of it runs to the end.
    f.fault.times = 0;
    assert.equal((await submit('env_b')).status, 'succeeded');
  });

  test('params read back after a restart are checked against the kind: a mismatch ends it failed, not a phase run on them', async () => {
    const { deployment } = await insertDeployment(db, {
      teamId: TEAM,
      projectId: 'proj_p',
      envId: 'env_r',
      kind: 'snapshot',
      params: { hang: 'yes' },
      phases: ['first', 'second', 'verdict'],
    });
    await engine.recover();
    assert.equal(await engine.waitFinished(deployment.ID, 20_000), 'failed');
    await engine.idle();
    const dep = await getDeploymentAnyTeam(db, deployment.ID);
    assert.equal(dep?.Error, 'engine: snapshot params do not match the kind: /hang Expected boolean');
    const phases = await listPhases(db, deployment.ID);
    assert.deepEqual(
      phases.map((p) => [p.Name, p.Status]),
      [
        ['first', 'failed'],
        ['second', 'skipped'],
        ['verdict', 'skipped'],
      ],
    );
  });

  test('a phase at its time limit is cancelled: its command fails and the queue is free', async () => {
    const alive = watchAlive();
    engine.phaseTimeoutMs = 50;
    try {
      const { id, status } = await submit('env_c', { hang: true });
      assert.equal(status, 'failed');
      const dep = await getDeploymentAnyTeam(db, id);
      assert.equal(dep?.Error, 'second: second timed out after 50 ms');
      assert.equal(phaseStopped, true, 'the phase was still running after its deployment finished');
      const cmd = await db.get<{ status: string; error: string }>(
        "SELECT status, error FROM commands WHERE env_id = 'env_c'",
      );
      assert.deepEqual(
        { ...cmd },
        { status: 'failed', error: 'env.exec cancelled: second timed out after 50 ms' },
      );
    } finally {
      engine.phaseTimeoutMs = 15 * 60_000;
    }
    // The next command of that environment is written at once, not after the cancelled one.
    const before = written.length;
    const next = dispatcher.run(TARGET, 'env_c', 'env.exec', { service: 'app', cmd: ['true'] });
    while (written.length === before) await new Promise((r) => setImmediate(r));
    const sent = written.at(-1) as Frame;
    await dispatcher.received({
      hostId: TARGET.hostId,
      teamId: TEAM,
      frame: { ...sent, type: 'result', ok: true, payload: { exit_code: 0, stdout: '', stderr: '' } },
    });
    assert.equal((await next).exit_code, 0);
    // Every timer of that bound has fired: nothing was thrown that would have killed the server.
    await alive.assertNothingEscapedAfter(50);
  });
});
