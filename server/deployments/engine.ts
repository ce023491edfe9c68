// The deployment engine: a kind is data (an ordered list of phase functions that return their
// evidence, then a verdict), and this one engine runs every kind and applies the failure rule
// (spec "Failure rule"): when a phase fails, the phases after it are skipped, the deployment's
// Error is `<phase>: <message>`, and the verdict runs anyway so the outcome is recorded.

import { EventEmitter } from 'node:events';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { KeyedQueue } from '../../shared/concurrency.ts';
import { guard, reportFault } from '../../shared/faults.ts';
import { type Db, now } from '../db/types.ts';
import { getEnv } from '../envs/store.ts';
import { appendEvent } from '../events/store.ts';
import { PHASE_TIMEOUT_MS } from '../hosts/dispatcher.ts';
import { getHostRow } from '../hosts/store.ts';
import { type PhaseFinished, phaseFinished } from '../metrics/channels.ts';
import { bounded, CANCEL_GRACE_MS } from './bounded.ts';
import type { OrchestratorDeps } from './deps.ts';
import {
  checkedParams,
  type Failure,
  type KindDef,
  type PhaseContext,
  type PhaseDef,
  PhaseFailure,
  phaseContext,
  phaseNames,
  Skip,
  stableCommandIds,
  type Verdict,
} from './kind.ts';
import { lapsedDeployments, type Unowned } from './lease-store.ts';
import { DEPLOY_LEASE_MS, fence, Ownership } from './owners.ts';
import { interruptedAt, type Recovery, takeUp } from './recovery.ts';
import {
  type Deployment,
  type DeploymentStatus,
  getDeploymentAnyTeam,
  insertDeployment,
  listPhases,
  type NewDeployment,
  type Phase,
  updateDeployment,
  updatePhase,
} from './store.ts';

export {
  type AnyPhaseContext,
  defineKind,
  type Failure,
  type KindDef,
  type PhaseContext,
  type PhaseDef,
  PhaseFailure,
  phaseNames,
  Skip,
  type Verdict,
} from './kind.ts';

type AnyKind = KindDef<unknown>;

export interface EngineOptions {
  /** This control-plane replica's id, the owner of the deployments it runs. */
  replica?: string;
  /** How long a deployment's lease lasts unrenewed before another replica adopts it. */
  leaseMs?: number;
}

export class DeploymentEngine {
  readonly deps: OrchestratorDeps;
  #kinds = new Map<string, AnyKind>();
  #finished = new EventEmitter();
  /** One deployment at a time per environment, in this process (across replicas: `owners`). */
  #queue = new KeyedQueue();
  /** This replica's deployments, their leases and their environments' claims. */
  readonly owners: Ownership;
  #running = new Set<Promise<void>>();
  phaseTimeoutMs = PHASE_TIMEOUT_MS;
  cancelGraceMs = CANCEL_GRACE_MS;
  recoveryHostWaitMs = 30_000;

  constructor(deps: OrchestratorDeps, kinds: readonly AnyKind[], opts: EngineOptions = {}) {
    this.deps = deps;
    this.owners = new Ownership(
      deps.db,
      opts.replica ?? newId(PREFIX.replica),
      opts.leaseMs ?? DEPLOY_LEASE_MS,
      deps.log,
    );
    for (const k of kinds) this.#kinds.set(k.kind, k);
    this.#finished.setMaxListeners(0);
  }

  get db(): Db {
    return this.deps.db;
  }

  /**
   * Records a deployment with its phases (all pending) and starts it in the background; returns
   * what the 202 response shows. Deployments of one environment run one after another.
   */
  async submit<I>(
    d: Omit<NewDeployment, 'phases'>,
    input: I,
  ): Promise<{ deployment: Deployment; phases: Phase[] }> {
    const kind = this.#kinds.get(d.kind);
    if (!kind) throw new Error(`deployment kind ${d.kind} cannot be started`);
    const created = await insertDeployment(this.db, {
      ...d,
      phases: phaseNames(kind),
      owner: this.owners.replica,
      leaseUntil: this.owners.until(),
    });
    this.#start(kind, created.deployment.ID, created.deployment.EnvID, input, null);
    return created;
  }

  /**
   * Runs a deployment once it holds its environment: in this process's queue of the environment
   * on a sole writer, else each waiting on the rows (a replica's queue cannot see the others').
   */
  #start(kind: AnyKind, id: string, envId: string, input: unknown, recovery: Recovery | null): void {
    const lost = this.owners.track(id);
    const task = () => this.#guarded(kind, id, envId, input, recovery, lost);
    this.#track(this.owners.shared ? task() : this.#queue.run(envId, task));
  }

  /** Resolves with the final status when the deployment finishes (or null at the timeout). */
  async waitFinished(id: string, timeoutMs: number): Promise<DeploymentStatus | null> {
    const current = await getDeploymentAnyTeam(this.db, id);
    if (current?.FinishedAt) return current.Status;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#finished.off(id, done);
        resolve(null);
      }, timeoutMs);
      // A waiter (a check run following its deployment) never keeps the process alive.
      timer.unref();
      // Another replica may run it (it adopted it): its end is seen in the row.
      const poll = this.owners.shared
        ? setInterval(
            guard('deployment engine: wait poll', async () => {
              const row = await getDeploymentAnyTeam(this.db, id);
              if (row?.FinishedAt) done(row.Status);
            }),
            this.owners.claimPollMs * 2,
          )
        : null;
      poll?.unref();
      const done = (status: DeploymentStatus) => {
        clearTimeout(timer);
        if (poll) clearInterval(poll);
        this.#finished.off(id, done);
        resolve(status);
      };
      this.#finished.once(id, done);
    });
  }

  #track(p: Promise<void>): void {
    this.#running.add(p);
    // A run reports its own failures (#guarded); anything that still escapes is a fault, logged.
    p.catch((err: unknown) => reportFault('deployment engine: run', err)).finally(() =>
      this.#running.delete(p),
    );
  }

  /**
   * Runs a deployment so that no failure is lost: whatever throws out of the run (a database
   * error in a phase update or the verdict) ends the deployment `failed` with `engine: <message>`,
   * appends `deployment.finished` and is logged.
   */
  async #guarded(
    kind: AnyKind,
    id: string,
    envId: string,
    input: unknown,
    recovery: Recovery | null,
    lost: AbortSignal,
  ): Promise<void> {
    const started = Date.now();
    try {
      if (!(await this.owners.claim(id, envId, lost))) return;
      await this.#run(kind, id, input, recovery, lost);
    } catch (err) {
      // Another replica adopted it and records its end: nothing more is written from here.
      if (lost.aborted) this.deps.log.warn({ deployment: id }, 'deployment run stopped: adopted elsewhere');
      else await this.#crashed(id, err, started);
    } finally {
      this.owners.untrack(id);
      this.owners.wake(envId);
    }
  }

  async #crashed(id: string, err: unknown, started: number): Promise<void> {
    const error = `engine: ${(err as Error)?.message || String(err)}`;
    this.deps.log.error({ err, deployment: id }, 'deployment run failed');
    try {
      const dep = await getDeploymentAnyTeam(this.db, id);
      if (!dep) return;
      let status: DeploymentStatus = 'failed';
      if (dep.FinishedAt) {
        status = dep.Status; // only its finished event was lost
      } else {
        for (const ph of await listPhases(this.db, id)) {
          if (ph.Status === 'running')
            await updatePhase(this.db, id, ph.Seq, { status: 'failed', error, finishedAt: now() });
          else if (ph.Status === 'pending') await updatePhase(this.db, id, ph.Seq, { status: 'skipped' });
        }
        await updateDeployment(this.db, id, { status, error, finishedAt: now() });
      }
      const body = { status, took_ms: Date.now() - started, error: dep.FinishedAt ? dep.Error : error };
      await this.#event(dep, 'deployment.finished', body);
      this.#finished.emit(id, status);
    } catch (again) {
      // The database itself is failing: the deployment stays open until the next start recovers it.
      this.deps.log.error({ err: again, deployment: id }, 'could not record the failed deployment');
    }
  }

  async #run(
    kind: AnyKind,
    id: string,
    input: unknown,
    recovery: Recovery | null,
    lost: AbortSignal,
  ): Promise<void> {
    const dep = await getDeploymentAnyTeam(this.db, id);
    if (!dep) return;
    // Where it was cut off is recorded first, whatever the checks of its params say.
    let failure = recovery ? await interruptedAt(this.db, id, recovery) : null;
    const ctx = phaseContext(this.deps, dep, checkedParams(kind, dep.Params), input);
    if (recovery) await this.#hostBack(dep);
    else await this.#event(dep, 'deployment.started', { kind: dep.Kind });
    const phases = await listPhases(this.db, id);
    for (const def of kind.phases) {
      const seq = phases.findIndex((p) => p.Name === def.name) + 1;
      if (phases[seq - 1].Status !== 'pending') continue;
      fence(lost);
      if (failure) {
        await updatePhase(this.db, id, seq, { status: 'skipped' });
        continue;
      }
      failure = await this.#phase(ctx, def, seq, lost);
    }
    fence(lost);
    await this.#verdict(kind, ctx, phases.length, failure, lost);
  }

  async #phase(
    ctx: PhaseContext<unknown>,
    def: PhaseDef<unknown>,
    seq: number,
    lost: AbortSignal,
  ): Promise<Failure | null> {
    const id = ctx.dep.ID;
    const t0 = Date.now();
    let status: PhaseFinished['status'] = 'failed';
    await updatePhase(this.db, id, seq, { status: 'running', startedAt: now() });
    try {
      const out = await bounded(
        (signal) => {
          ctx.signal = AbortSignal.any([signal, lost]);
          return def.run(ctx);
        },
        this.phaseTimeoutMs,
        def.name,
        this.cancelGraceMs,
      );
      fence(lost);
      const skipped = out instanceof Skip;
      status = skipped ? 'skipped' : 'ok';
      await updatePhase(this.db, id, seq, {
        status: skipped ? 'skipped' : 'ok',
        evidence: skipped ? out.evidence : (out ?? null),
        finishedAt: now(),
      });
      return null;
    } catch (err) {
      fence(lost);
      const message = (err as Error).message || String(err);
      const evidence = err instanceof PhaseFailure ? err.evidence : undefined;
      await updatePhase(this.db, id, seq, { status: 'failed', error: message, evidence, finishedAt: now() });
      await updateDeployment(this.db, id, { error: `${def.name}: ${message}` });
      return { phase: def.name, message };
    } finally {
      phaseFinished.publish({ kind: ctx.dep.Kind, phase: def.name, status, ms: Date.now() - t0 });
      if (!lost.aborted) await this.#saveParams(ctx);
    }
  }

  async #verdict(
    kind: AnyKind,
    ctx: PhaseContext<unknown>,
    seq: number,
    failure: Failure | null,
    lost: AbortSignal,
  ): Promise<void> {
    const id = ctx.dep.ID;
    await updatePhase(this.db, id, seq, { status: 'running', startedAt: now() });
    let verdict: Verdict;
    let error = failure ? `${failure.phase}: ${failure.message}` : '';
    try {
      verdict = await bounded(
        (signal) => {
          ctx.signal = AbortSignal.any([signal, lost]);
          ctx.commandId = stableCommandIds(`${id}/verdict`);
          return kind.verdict(ctx, failure);
        },
        this.phaseTimeoutMs,
        'verdict',
        this.cancelGraceMs,
      );
      fence(lost);
      await updatePhase(this.db, id, seq, {
        status: 'ok',
        evidence: verdict.evidence ?? null,
        finishedAt: now(),
      });
    } catch (err) {
      fence(lost);
      const message = (err as Error).message;
      error ||= `verdict: ${message}`;
      verdict = { status: 'failed', evidence: null };
      await updatePhase(this.db, id, seq, { status: 'failed', error: message, finishedAt: now() });
    }
    await this.#saveParams(ctx);
    const tookMs = Date.now() - ctx.startedAt;
    await updateDeployment(this.db, id, { status: verdict.status, error, finishedAt: now() });
    await this.#event(ctx.dep, 'deployment.finished', { status: verdict.status, took_ms: tookMs, error });
    this.#finished.emit(id, verdict.status);
  }

  /**
   * A recovered deployment's verdict may need the environment's host (a deploy rolls back), and
   * after a control-plane restart sidecars take a few seconds to reconnect: give them that time.
   */
  async #hostBack(dep: Deployment & { TeamID: string }): Promise<void> {
    const env = await getEnv(this.db, dep.TeamID, dep.EnvID);
    const host = env?.HostID ? await getHostRow(this.db, env.HostID) : undefined;
    if (host?.kind === 'sidecar') await this.deps.hub.waitConnected(env!.HostID, this.recoveryHostWaitMs);
  }

  async #saveParams(ctx: PhaseContext<unknown>): Promise<void> {
    await updateDeployment(this.db, ctx.dep.ID, { params: ctx.params });
  }

  async #event(dep: Deployment & { TeamID: string }, kind: string, body: unknown): Promise<void> {
    await appendEvent(this.db, dep.TeamID, `env:${dep.EnvID}`, kind, body, this.deps.events);
    await appendEvent(this.db, dep.TeamID, `dep:${dep.ID}`, kind, body, this.deps.events);
  }

  /**
   * After a control-plane restart nothing can still be running: the phase that was running
   * fails with a clear reason, and the kind's own verdict decides the outcome (a deploy rolls
   * back when it can), exactly as for any other failure. On a sole writer that is every unfinished
   * deployment; on a shared database, those whose owner's lease lapsed (now, and from then on on
   * every lease tick: a dead replica's deployments are adopted the same way).
   */
  async recover(): Promise<number> {
    const sole = !this.owners.shared;
    const n = await this.#adopt(await lapsedDeployments(this.db, now(), sole), sole ? 'restart' : 'adopted');
    this.owners.start(async (rows) => {
      await this.#adopt(rows, 'adopted');
    });
    return n;
  }

  /** Takes up deployments nobody runs any more; returns how many this replica took. */
  async #adopt(rows: readonly Unowned[], how: Recovery): Promise<number> {
    let n = 0;
    for (const r of rows) {
      if (this.owners.runs(r.id)) continue;
      if (!(await takeUp(this.db, this.owners, this.deps.log, r, how))) continue;
      n++;
      const kind = this.#kinds.get(r.kind);
      if (!kind) {
        await updateDeployment(this.db, r.id, {
          status: 'failed',
          error: 'unknown deployment kind',
          finishedAt: now(),
        });
        continue;
      }
      this.#start(kind, r.id, r.env_id, null, how);
    }
    return n;
  }

  /** Stops renewing leases and ends waits for environments (shutdown); running phases go on. */
  close(): void {
    this.owners.close();
  }

  /** Waits for running deployments (used by tests and shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size) await Promise.allSettled([...this.#running]);
  }
}
