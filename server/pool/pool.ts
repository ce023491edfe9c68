// Warm pools: a healthy version keeps N forks ready, so `POST /v1/sandboxes
// {from_version}` hands one out in milliseconds instead of forking on demand.
//
// - `POST /v1/versions/{ver}/pool {size}` sets the size; GET reads it; DELETE removes the pool
//   and destroys its members.
// - Members are ordinary fork environments (stage `fork`) named `pool-<hex>`, hidden from
//   listings until claimed, and paused (`env.pause`) once healthy; a claim thaws (`env.unpause`). A claim deletes the member row (one statement: no double claim),
//   renames the environment to the sandbox's name and returns it with its fork deployment.
// - A background refill (every second, and at once after a change or claim) forks what is
//   missing, marks members ready when their fork succeeded, drops failed ones, and destroys every
//   member, and the pool, of a version that is no longer its environment's current one.
// - With several control-plane replicas, one refills at a time: the replica holding the lease
//   `pool.refill` (cluster/leases.ts), renewed as it refills; another takes over once it lapses.
//   Claims, sizes and statuses are rows, so any replica answers them.

/**
 * A pool's largest size: 500 paused busybox members fit one host (docs/benchmarks.md, "Warm pool
 * at scale"); each member holds an environment's network and subnet, so the host's subnet range
 * (2,048 by default) bounds all pools together.
 */
import { MAX_POOL_SIZE } from '../../protocol/api/bodies.ts';
import { nameSuffix } from '../../protocol/ids.ts';
import { retryFailures } from '../../shared/concurrency.ts';
import { guard } from '../../shared/faults.ts';
import type { Lease } from '../cluster/leases.ts';
import type { AppContext } from '../context.ts';
import { getDeployment } from '../deployments/store.ts';
import { checkEnvName, destroy, forkVersion, freeName } from '../envs/lifecycle.ts';
import * as envStore from '../envs/store.ts';
import { BadRequest, Conflict, NotFound } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { type PoolState, poolState } from '../metrics/channels.ts';
import * as store from './store.ts';

export { MAX_POOL_SIZE };
export const REFILL_EVERY_MS = 1000;
/** The refill lease: a replica that stops renewing it (it died) is replaced after this long. */
export const REFILL_LEASE_MS = 15_000;
/** The name of the refill's lease. */
export const REFILL_LEASE = 'pool.refill';
/**
 * After a claim, the version's refill waits this long: the claimed sandbox's thaw and first
 * commands get the host before a replacement fork (compose, container starts: about a second of
 * both cores here) competes with them (otherwise it slows claim → first exec).
 */
export const CLAIM_QUIET_MS = 500;
const COMMAND_TIMEOUT_MS = 60_000;

export interface PoolStatus {
  version: string;
  size: number;
  /** Members whose fork succeeded, ready to claim. */
  ready: number;
  /** Members still forking. */
  starting: number;
}

export class WarmPool {
  readonly #ctx: AppContext;
  readonly #lease: Lease;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | null = null;
  #again = false;
  /** When each version's current quiet window (CLAIM_QUIET_MS) opened. */
  readonly #claimedAt = new Map<string, number>();
  #stopped = false;
  /** Called with each refill error (logged by the app); the next pass retries. */
  onError: (err: Error) => void = () => {};

  /** `lease`: the refill's (REFILL_LEASE), held by this replica while it refills. */
  constructor(ctx: AppContext, lease: Lease) {
    this.#ctx = ctx;
    this.#lease = lease;
  }

  /** Refill passes this replica ran while holding the lease (tests, operators). */
  passes = 0;

  start(): void {
    this.#timer = setInterval(
      guard('warm pool: refill', () => this.kick()),
      REFILL_EVERY_MS,
    );
    this.#timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#running;
    // Given up at once: another replica refills at its next tick, not after the lease lapsed.
    await this.#lease.release().catch((err: Error) => this.onError(err));
  }

  /** Runs a refill pass now (or right after the one running). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#refillAll()
      .catch((err: Error) => this.onError(err))
      .finally(() => {
        this.#running = null;
        if (this.#again) {
          this.#again = false;
          this.kick();
        }
      });
  }

  /** Resolves when no refill pass is running (tests). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async set(caller: Caller, versionId: string, size: number): Promise<PoolStatus> {
    if (!Number.isInteger(size) || size < 0 || size > MAX_POOL_SIZE)
      throw new BadRequest(`size must be an integer from 0 to ${MAX_POOL_SIZE}`);
    const v = await this.#version(caller, versionId);
    if (!(await this.#current(caller.teamId, v)))
      throw new Conflict(`version ${v.ID} is not its environment's current version; pool its current one`);
    await store.upsertPool(this.#ctx.db, caller.teamId, v.ID, size);
    this.kick();
    return this.status(caller, v.ID);
  }

  async status(caller: Caller, versionId: string): Promise<PoolStatus> {
    const pool = await store.getPool(this.#ctx.db, caller.teamId, versionId);
    if (!pool) throw new NotFound(`version ${versionId} has no pool`);
    const members = await store.listMembers(this.#ctx.db, versionId);
    const ready = members.filter((m) => m.ready).length;
    return { version: versionId, size: pool.size, ready, starting: members.length - ready };
  }

  async remove(caller: Caller, versionId: string): Promise<PoolStatus> {
    const before = await this.status(caller, versionId);
    await this.#drain(caller.teamId, versionId);
    return { ...before, size: 0, ready: 0, starting: 0 };
  }

  /**
   * Hands out a ready member of the version, renamed to `name` (default `sbx-<n>`), with the
   * fork deployment that made it; null when none is ready (the caller forks as usual).
   */
  async claim(caller: Caller, v: envStore.Version, name?: string) {
    const db = this.#ctx.db;
    if (name !== undefined) checkEnvName(name);
    if (name && (await envStore.findEnvByName(db, v.ProjectID, name))) return null; // the fork path says why
    const member = await store.claimMember(db, caller.teamId, v.ID);
    if (!member) return null;
    // The window opens at the first claim and is not pushed back by later ones: a steady stream of
    // claims still has its pool refilled every CLAIM_QUIET_MS.
    const opened = this.#claimedAt.get(v.ID);
    if (opened === undefined || Date.now() - opened >= CLAIM_QUIET_MS) {
      this.#claimedAt.set(v.ID, Date.now());
      setTimeout(() => this.kick(), CLAIM_QUIET_MS).unref();
    }
    const env = await envStore.getEnv(db, caller.teamId, member.env_id);
    try {
      if (!env) return null;
      await this.#command(caller.teamId, env, 'env.unpause');
    } catch {
      // A member that cannot be thawed is no sandbox: it goes, and the caller forks cold.
      if (env) await destroy(db, this.#ctx.engine, caller, env.ID).catch(() => {});
      return null;
    }
    await this.#rename(v.ProjectID, member.env_id, name);
    const environment = await envStore.getEnv(db, caller.teamId, member.env_id);
    const deployment = await getDeployment(db, caller.teamId, member.deployment_id);
    return environment && deployment ? { environment, deployment } : null;
  }

  /** Gives the claimed member its name; a default name taken by a concurrent sandbox is drawn again. */
  async #rename(projectId: string, envId: string, name?: string): Promise<void> {
    await retryFailures(
      async () =>
        envStore.renameEnv(this.#ctx.db, envId, name ?? (await freeName(this.#ctx.db, projectId, 'sbx-'))),
      { attempts: 10, when: () => name === undefined },
    );
  }

  async #command(
    teamId: string,
    env: envStore.Environment,
    kind: 'env.pause' | 'env.unpause',
  ): Promise<void> {
    const target = await this.#ctx.targets.of(teamId, env.HostID);
    await this.#ctx.dispatcher.run(target, env.ID, kind, {}, COMMAND_TIMEOUT_MS);
  }

  async #version(caller: Caller, versionId: string): Promise<envStore.Version> {
    const v = await envStore.getVersion(this.#ctx.db, caller.teamId, versionId);
    if (!v) throw new NotFound(`version ${versionId} not found`);
    if (!v.Healthy || !v.Snapshot) throw new BadRequest(`version ${v.ID} is not a healthy snapshot`);
    return v;
  }

  async #current(teamId: string, v: envStore.Version): Promise<boolean> {
    const env = await envStore.getEnv(this.#ctx.db, teamId, v.EnvID);
    return Boolean(env && env.Status !== 'destroyed' && env.CurrentVersionID === v.ID);
  }

  async #refillAll(): Promise<void> {
    if (!(await this.#lease.held())) return;
    this.passes++;
    const state: PoolState['pools'] = [];
    for (const pool of await store.listPools(this.#ctx.db)) {
      if (this.#stopped) return;
      await this.#refill(pool);
      const members = await store.listMembers(this.#ctx.db, pool.version_id);
      const ready = members.filter((m) => m.ready).length;
      if (await store.getPool(this.#ctx.db, pool.team_id, pool.version_id))
        state.push({ version: pool.version_id, size: pool.size, ready, starting: members.length - ready });
    }
    poolState.publish({ pools: state });
  }

  async #refill(pool: store.PoolRow): Promise<void> {
    const { db, engine } = this.#ctx;
    const caller: Caller = { teamId: pool.team_id, role: 'pool' };
    const v = await envStore.getVersion(db, pool.team_id, pool.version_id);
    if (!v || !(await this.#current(pool.team_id, v))) return this.#drain(pool.team_id, pool.version_id);
    // Claimed just now: the pass that the claim scheduled for the window's end refills it.
    if (Date.now() - (this.#claimedAt.get(v.ID) ?? 0) < CLAIM_QUIET_MS) return;
    this.#claimedAt.delete(v.ID);
    let members = await store.listMembers(db, v.ID);
    for (const m of members) {
      if (m.ready) continue;
      const env = await envStore.getEnv(db, pool.team_id, m.env_id);
      if (env?.Status === 'running') {
        // Paused, a member costs no CPU while it waits; a host that cannot pause keeps it running.
        await this.#command(pool.team_id, env, 'env.pause').catch(() => {});
        await store.markReady(db, m.env_id);
      } else if (!env || env.Status === 'failed' || env.Status === 'destroyed')
        await this.#discard(caller, m.env_id);
    }
    members = await store.listMembers(db, v.ID);
    for (let n = members.length; n < pool.size; n++) {
      const started = await forkVersion(db, engine, caller, v, `pool-${nameSuffix(10)}`);
      await store.insertMember(db, {
        envId: started.environment.ID,
        versionId: v.ID,
        teamId: pool.team_id,
        deploymentId: started.deployment.ID,
      });
    }
    // A smaller size: the newest members go first.
    for (const m of members.slice(pool.size).reverse()) await this.#discard(caller, m.env_id);
  }

  /** Destroys every unclaimed member of the version and forgets its pool. */
  async #drain(teamId: string, versionId: string): Promise<void> {
    this.#claimedAt.delete(versionId);
    await store.deletePool(this.#ctx.db, versionId);
    for (const m of await store.listMembers(this.#ctx.db, versionId))
      await this.#discard({ teamId, role: 'pool' }, m.env_id);
  }

  async #discard(caller: Caller, envId: string): Promise<void> {
    if (!(await store.deleteMember(this.#ctx.db, envId))) return; // claimed meanwhile
    const env = await envStore.getEnv(this.#ctx.db, caller.teamId, envId);
    if (env && env.Status !== 'destroyed' && env.Status !== 'destroying')
      await destroy(this.#ctx.db, this.#ctx.engine, caller, envId);
  }
}
