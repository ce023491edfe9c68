// Two control-plane replicas on one Postgres, as two engines with their own connection pools and
// replica ids: a deployment of an environment never runs while another of it runs on either
// replica (the database refuses a second `running` row), they run in the order they were asked
// for, and a deployment whose replica stops renewing its lease is adopted by the other and ends
// by the failure rule, its command failed once and never sent again; a replica that comes back
// after its deployment was adopted writes nothing more to it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Type } from '@sinclair/typebox';
import { type Frame, frame } from '../../protocol/frames.ts';
import { watchAlive } from '../../test/support/alive.ts';
import { dbTarget } from '../../test/support/server.ts';
import { tier } from '../../test/support/tiers.ts';
import { openDb } from '../db/open.ts';
import type { Db, Param } from '../db/types.ts';
import { CommandTargets } from '../hosts/command-target.ts';
import { Dispatcher } from '../hosts/dispatcher.ts';
import type { OrchestratorDeps } from './deps.ts';
import { DeploymentEngine, type KindDef } from './engine.ts';
import { send } from './kinds/common.ts';
import { getDeploymentAnyTeam, listPhases } from './store.ts';

const TEAM = 'team_t';
const TARGET = { hostId: 'host_h', teamId: TEAM, kind: 'sidecar' };
// Long enough that a loaded machine's stalls do not lapse a live replica's lease (which would make
// the other adopt it: right for a stall past the lease, but not what the ordering tests are about).
const LEASE_MS = 3000;

/** A promise with its resolve, for holding a phase where the test wants it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

async function until<T>(cond: () => Promise<T> | T, what: string, ms = 30_000): Promise<NonNullable<T>> {
  const start = Date.now();
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The database, except that statements matching `failing` throw while it is set (a lost connection). */
function cut(db: Db) {
  const state = { failing: null as RegExp | null };
  const check = (sql: string, _p?: readonly Param[]) => {
    if (state.failing?.test(sql)) throw new Error('connection to the database lost');
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
  return { db: wrapped, state };
}

describe('deployments across replicas on one Postgres', { skip: tier('postgres') }, () => {
  const dbs: Db[] = [];
  const engines: DeploymentEngine[] = [];
  const links: ReturnType<typeof cut>[] = [];
  const written: Frame[][] = [];
  const dispatchers: Dispatcher[] = [];
  /** Phases running now, per environment, and the most ever running at once. */
  const active = new Map<string, number>();
  let most = 0;
  const holds = new Map<string, ReturnType<typeof gate>>();
  const entered = new Set<string>();

  const kind: KindDef<unknown> = {
    kind: 'snapshot',
    params: Type.Object({
      hold: Type.Optional(Type.Boolean()),
      send: Type.Optional(Type.Boolean()),
      fail: Type.Optional(Type.Boolean()),
    }),
    phases: [
      {
        name: 'work',
        run: async (ctx) => {
          const n = (active.get(ctx.dep.EnvID) ?? 0) + 1;
          active.set(ctx.dep.EnvID, n);
          most = Math.max(most, n);
          try {
            entered.add(ctx.dep.ID);
            if (ctx.params.send)
              await ctx.deps.dispatcher.run(
                TARGET,
                ctx.dep.EnvID,
                'env.snapshot',
                { name: 's1' },
                undefined,
                ctx.signal,
              );
            if (ctx.params.hold) await holds.get(ctx.dep.ID)?.opened;
            if (ctx.params.fail) throw new Error('it failed');
            // A few round trips to the database, so overlapping runs would overlap here.
            for (let i = 0; i < 3; i++) await ctx.env().catch(() => null);
            return { replica: 'done' };
          } finally {
            active.set(ctx.dep.EnvID, (active.get(ctx.dep.EnvID) ?? 1) - 1);
          }
        },
      },
    ],
    // A failed one cleans up on the host, as a first deploy's verdict does.
    verdict: async (ctx, failure) => {
      if (failure && ctx.params.fail) await send(ctx, TARGET, ctx.dep.EnvID, 'env.destroy', {});
      return { status: failure ? 'failed' : 'succeeded', evidence: null };
    },
  };

  const engineOn = (db: Db, i: number) => {
    const replica = `rep_${'ab'[i]}`;
    // As main.ts wires them: the dispatcher records the engine's replica as each command's origin.
    const dispatcher = new Dispatcher(db, undefined, undefined, undefined, undefined, { replica });
    dispatchers[i] = dispatcher;
    written[i] = [];
    // The host's stream is on this replica; it takes commands and answers none by itself.
    dispatcher.connected({
      hostId: TARGET.hostId,
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (fr) => {
        written[i].push(fr);
        return true;
      },
      current: () => true,
    });
    const deps: OrchestratorDeps = {
      db,
      log: { warn: () => {}, error: () => {} },
      dispatcher,
      hub: { isConnected: () => true, waitForHost: async () => '', waitConnected: async () => true },
      targets: new CommandTargets(db, { isConnected: () => true }),
      provisioners: new Map(),
      mintJoinToken: async () => '',
      ensureDriverHosts: async () => {},
      publicUrl: 'http://127.0.0.1:1',
      sidecarUrl: 'http://127.0.0.1:1/svcd',
      joinWaitMs: 0,
    };
    const e = new DeploymentEngine(deps, [kind], { replica, leaseMs: LEASE_MS });
    e.owners.claimPollMs = 50;
    return e;
  };

  before(async () => {
    const { target } = await dbTarget('postgres');
    for (const i of [0, 1]) {
      const db = (await openDb(target)).db;
      dbs.push(db);
      links.push(cut(db));
      engines.push(engineOn(links[i].db, i));
    }
    for (const e of engines) await e.recover();
  });
  after(async () => {
    for (const h of holds.values()) h.open();
    for (const e of engines) {
      e.close();
      await e.idle();
    }
    for (const db of dbs) await db.close();
  });

  const submit = (e: DeploymentEngine, envId: string, params: Record<string, unknown> = {}) =>
    e.submit({ teamId: TEAM, projectId: 'proj_p', envId, kind: 'snapshot', params }, null);
  const finished = (id: string) =>
    until(async () => {
      const d = await getDeploymentAnyTeam(dbs[0], id);
      return d?.FinishedAt ? d : null;
    }, `deployment ${id} to finish`);

  test('a deployment asked of B while A runs one of the same environment waits, then runs', async () => {
    const [a, b] = engines;
    const first = await submit(a, 'env_race', { hold: true });
    holds.set(first.deployment.ID, gate());
    await until(() => entered.has(first.deployment.ID), 'the first deployment to hold');
    const second = await submit(b, 'env_race');
    // B found the environment held (at least twice: it asks again) and left the deployment pending.
    await until(() => (b.owners.waits.get(second.deployment.ID) ?? 0) >= 2, 'B to wait for the environment');
    assert.equal((await getDeploymentAnyTeam(dbs[1], second.deployment.ID))?.Status, 'pending');
    assert.deepEqual(
      (await listPhases(dbs[1], second.deployment.ID)).map((p) => p.Status),
      ['pending', 'pending'],
    );
    holds.get(first.deployment.ID)?.open();
    const one = await finished(first.deployment.ID);
    const two = await finished(second.deployment.ID);
    assert.equal(one.Status, 'succeeded');
    assert.equal(two.Status, 'succeeded');
    const [started] = await listPhases(dbs[1], second.deployment.ID);
    assert.ok(
      (started.StartedAt as string) >= (one.FinishedAt as string),
      'the second started before the first ended',
    );
  });

  test('deployments of one environment asked of the two replicas in turn run one at a time, in order', async () => {
    most = 0;
    const ids: string[] = [];
    // Each is recorded before the next is asked for, alternating replicas: that is their order.
    for (let i = 0; i < 8; i++) ids.push((await submit(engines[i % 2], 'env_many')).deployment.ID);
    const done = await Promise.all(ids.map(finished));
    assert.deepEqual(
      done.map((d) => d.Status),
      ids.map(() => 'succeeded'),
    );
    assert.equal(most, 1, 'two deployments of one environment ran at once');
    for (let i = 1; i < done.length; i++) {
      const [p] = await listPhases(dbs[0], done[i].ID);
      assert.ok((p.StartedAt as string) >= (done[i - 1].FinishedAt as string), `deployment ${i} overtook`);
    }
  });

  test('deployments of one environment asked of both replicas at the same moment never overlap', async () => {
    most = 0;
    const asked = Array.from({ length: 8 }, (_, i) => submit(engines[i % 2], 'env_burst'));
    const ids = (await Promise.all(asked)).map((s) => s.deployment.ID);
    const done = await Promise.all(ids.map(finished));
    assert.ok(done.every((d) => d.Status === 'succeeded'));
    assert.equal(most, 1, 'two deployments of one environment ran at once');
    // Asked at once, their order is whichever recorded first; one still ends before the next starts.
    const spans = [];
    for (const d of done)
      spans.push([(await listPhases(dbs[0], d.ID))[0].StartedAt as string, d.FinishedAt as string]);
    spans.sort((x, y) => (x[0] < y[0] ? -1 : 1));
    for (let i = 1; i < spans.length; i++) assert.ok(spans[i][0] >= spans[i - 1][1], `overlap at ${i}`);
  });

  test('the database itself refuses a second running deployment of one environment', async () => {
    const [a] = engines;
    const first = await submit(a, 'env_unique', { hold: true });
    holds.set(first.deployment.ID, gate());
    await until(() => entered.has(first.deployment.ID), 'the first deployment to hold');
    const other = await submit(engines[1], 'env_other', { hold: true });
    holds.set(other.deployment.ID, gate());
    await until(() => entered.has(other.deployment.ID), 'the other deployment to hold');
    await assert.rejects(
      dbs[0].run("UPDATE deployments SET env_id = 'env_unique' WHERE id = ?", [other.deployment.ID]),
      /duplicate key|unique/i,
    );
    holds.get(first.deployment.ID)?.open();
    holds.get(other.deployment.ID)?.open();
    await finished(first.deployment.ID);
    await finished(other.deployment.ID);
  });

  test('a replica that stops renewing loses its deployment to the other, which ends it by the failure rule; the first writes nothing more', async () => {
    const alive = watchAlive();
    const [a, b] = engines;
    const dep = await submit(a, 'env_adopt', { hold: true, send: true });
    holds.set(dep.deployment.ID, gate());
    // A sent the phase's command to the host (on A) and holds.
    await until(
      () => entered.has(dep.deployment.ID) && written[0].some((f) => f.kind === 'env.snapshot'),
      'A to send',
    );
    // A loses the database for its lease renewals (a stalled or partitioned replica).
    links[0].state.failing = /lease_until/;
    const out = await finished(dep.deployment.ID);
    assert.equal(out.Status, 'failed');
    assert.equal(out.Error, 'work: the control-plane replica running this phase stopped');
    const row = await dbs[1].get<{ owner: string }>('SELECT owner FROM deployments WHERE id = ?', [
      dep.deployment.ID,
    ]);
    assert.equal(row?.owner, 'rep_b');
    const cmds = await dbs[1].all<{ status: string; error: string }>(
      "SELECT status, error FROM commands WHERE env_id = 'env_adopt'",
    );
    assert.deepEqual(
      cmds.map((c) => ({ ...c })),
      [{ status: 'failed', error: 'the control-plane replica waiting for this result stopped' }],
    );
    // B ran the verdict without sending the phase's command again.
    assert.equal(written[1].filter((f) => f.type === 'command').length, 0);
    // A gets its database back: its next tick finds the deployment is B's and stops its run,
    // which then writes nothing (the phase A held ends; its row stays as B recorded it).
    links[0].state.failing = null;
    const phasesBefore = await listPhases(dbs[1], dep.deployment.ID);
    await until(async () => {
      await new Promise((r) => setTimeout(r, LEASE_MS / 3));
      return !a.owners.runs(dep.deployment.ID);
    }, 'A to stop its run');
    await a.idle();
    assert.deepEqual(await listPhases(dbs[1], dep.deployment.ID), phasesBefore);
    assert.deepEqual(await getDeploymentAnyTeam(dbs[1], dep.deployment.ID), out);
    // Both replicas are alive past the lease bound (every lease timer has fired).
    await alive.assertNothingEscapedAfter(LEASE_MS);
    assert.equal(b.owners.runs(dep.deployment.ID), false);
  });

  test("an adopted deployment's verdict sends its cleanup under the id the dead replica used: the host runs it once", async () => {
    const [a, b] = engines;
    const dep = await submit(a, 'env_verdict', { fail: true });
    const destroys = (i: number) => written[i].filter((f) => f.kind === 'env.destroy');
    // A's verdict sent the cleanup; the host has not answered when A stops renewing.
    await until(() => destroys(0).length === 1, "A's verdict to send its cleanup");
    const id = destroys(0)[0].command_id as string;
    let again = '';
    try {
      links[0].state.failing = /lease_until/;
      await until(() => destroys(1).length === 1, "B's verdict to send its cleanup");
      again = destroys(1)[0].command_id as string;
      // A gets its database back while B waits for the host: A finds the deployment B's, stops its
      // run and gives up its own wait for the cleanup, writing nothing over the row B reopened.
      links[0].state.failing = null;
      await until(async () => {
        await new Promise((r) => setTimeout(r, LEASE_MS / 3));
        return !a.owners.runs(dep.deployment.ID);
      }, 'A to stop its run');
      await a.idle();
    } finally {
      links[0].state.failing = null;
      // The host answers what B sent (whichever id), so nothing is left waiting if a check fails.
      if (again)
        dispatchers[1].received({
          hostId: TARGET.hostId,
          teamId: TEAM,
          frame: frame('result', { command_id: again, ok: true, payload: { destroyed: 'env_verdict' } }),
        });
    }
    assert.equal(again, id, 'the same command, which the host answers from what it kept');
    const out = await finished(dep.deployment.ID);
    assert.equal(out.Status, 'failed');
    assert.equal(out.Error, 'work: it failed');
    const rows = await dbs[1].all<{ id: string; status: string; origin: string }>(
      "SELECT id, status, origin FROM commands WHERE env_id = 'env_verdict' AND kind = 'env.destroy'",
    );
    assert.deepEqual(
      rows.map((r) => ({ ...r })),
      [{ id, status: 'succeeded', origin: 'rep_b' }],
    );
    assert.equal(b.owners.runs(dep.deployment.ID), false);
  });
});
