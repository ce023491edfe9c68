// The deployment engine: a kind is data (an ordered list of phase functions that return their
// evidence, then a verdict), and this one engine runs every kind and applies the failure rule
// (spec "Failure rule"): when a phase fails, the phases after it are skipped, the deployment's
// Error is `<phase>: <message>`, and the verdict runs anyway so the outcome is recorded.

import { EventEmitter } from 'node:events';
import { KeyedQueue } from '../../shared/concurrency.ts';
import { reportFault } from '../../shared/faults.ts';
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
  type Verdict,
} from './kind.ts';
import {
  type Deployment,
  type DeploymentStatus,
  getDeploymentAnyTeam,
  insertDeployment,
  listPhases,
  listUnfinishedDeployments,
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

export class DeploymentEngine {
  readonly deps: OrchestratorDeps;
  #kinds = new Map<string, AnyKind>();
  #finished = new EventEmitter();
  /** One deployment at a time per environment. */
  #queue = new KeyedQueue();
  #running = new Set<Promise<void>>();
  phaseTimeoutMs = PHASE_TIMEOUT_MS;
  cancelGraceMs = CANCEL_GRACE_MS;
  recoveryHostWaitMs = 30_000;

  constructor(deps: OrchestratorDeps, kinds: readonly AnyKind[]) {
    this.deps = deps;
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
    const created = await insertDeployment(this.db, { ...d, phases: phaseNames(kind) });
    this.#track(
      this.#queue.run(created.deployment.EnvID, () =>
        this.#guarded(kind, created.deployment.ID, input, null),
      ),
    );
    return created;
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
      const done = (status: DeploymentStatus) => {
        clearTimeout(timer);
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
    input: unknown,
    recovery: { failure: Failure | null } | null,
  ): Promise<void> {
    const started = Date.now();
    try {
      await this.#run(kind, id, input, recovery);
    } catch (err) {
      await this.#crashed(id, err, started);
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
    recovery: { failure: Failure | null } | null,
  ): Promise<void> {
    const dep = await getDeploymentAnyTeam(this.db, id);
    if (!dep) return;
    const ctx = phaseContext(this.deps, dep, checkedParams(kind, dep.Params), input);
    const phases = await listPhases(this.db, id);
    let failure = recovery ? recovery.failure : null;
    if (recovery) await this.#hostBack(dep);
    else {
      await updateDeployment(this.db, id, { status: 'running' });
      await this.#event(dep, 'deployment.started', { kind: dep.Kind });
    }
    for (const def of kind.phases) {
      const seq = phases.findIndex((p) => p.Name === def.name) + 1;
      if (phases[seq - 1].Status !== 'pending') continue;
      if (failure) {
        await updatePhase(this.db, id, seq, { status: 'skipped' });
        continue;
      }
      failure = await this.#phase(ctx, def, seq);
    }
    await this.#verdict(kind, ctx, phases.length, failure);
  }

  async #phase(ctx: PhaseContext<unknown>, def: PhaseDef<unknown>, seq: number): Promise<Failure | null> {
    const id = ctx.dep.ID;
    const t0 = Date.now();
    let status: PhaseFinished['status'] = 'failed';
    await updatePhase(this.db, id, seq, { status: 'running', startedAt: now() });
    try {
      const out = await bounded(
        (signal) => {
          ctx.signal = signal;
          return def.run(ctx);
        },
        this.phaseTimeoutMs,
        def.name,
        this.cancelGraceMs,
      );
      const skipped = out instanceof Skip;
      status = skipped ? 'skipped' : 'ok';
      await updatePhase(this.db, id, seq, {
        status: skipped ? 'skipped' : 'ok',
        evidence: skipped ? out.evidence : (out ?? null),
        finishedAt: now(),
      });
      return null;
    } catch (err) {
      const message = (err as Error).message || String(err);
      const evidence = err instanceof PhaseFailure ? err.evidence : undefined;
      await updatePhase(this.db, id, seq, { status: 'failed', error: message, evidence, finishedAt: now() });
      await updateDeployment(this.db, id, { error: `${def.name}: ${message}` });
      return { phase: def.name, message };
    } finally {
      phaseFinished.publish({ kind: ctx.dep.Kind, phase: def.name, status, ms: Date.now() - t0 });
      await this.#saveParams(ctx);
    }
  }

  async #verdict(
    kind: AnyKind,
    ctx: PhaseContext<unknown>,
    seq: number,
    failure: Failure | null,
  ): Promise<void> {
    const id = ctx.dep.ID;
    await updatePhase(this.db, id, seq, { status: 'running', startedAt: now() });
    let verdict: Verdict;
    let error = failure ? `${failure.phase}: ${failure.message}` : '';
    try {
      verdict = await bounded(
        (signal) => {
          ctx.signal = signal;
          return kind.verdict(ctx, failure);
        },
        this.phaseTimeoutMs,
        'verdict',
        this.cancelGraceMs,
      );
      await updatePhase(this.db, id, seq, {
        status: 'ok',
        evidence: verdict.evidence ?? null,
        finishedAt: now(),
      });
    } catch (err) {
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
   * back when it can), exactly as for any other failure.
   */
  async recover(): Promise<number> {
    const rows = await listUnfinishedDeployments(this.db);
    for (const r of rows) {
      const failure = await this.#interruptedAt(r.id);
      const kind = this.#kinds.get(r.kind);
      if (!kind) {
        await updateDeployment(this.db, r.id, {
          status: 'failed',
          error: 'unknown deployment kind',
          finishedAt: now(),
        });
        continue;
      }
      await updateDeployment(this.db, r.id, { status: 'running' });
      this.#track(this.#queue.run(r.env_id, () => this.#guarded(kind, r.id, null, { failure })));
    }
    return rows.length;
  }

  /** Marks where a deployment was cut off and returns the failure its verdict must see. */
  async #interruptedAt(id: string): Promise<Failure | null> {
    const phases = await listPhases(this.db, id);
    const work = phases.slice(0, -1);
    const cut = work.find((p) => p.Status === 'running') ?? work.find((p) => p.Status === 'pending');
    if (!cut) {
      // Every phase had finished; the verdict was running or about to: run it again.
      const failed = work.find((p) => p.Status === 'failed');
      return failed ? { phase: failed.Name, message: failed.Error } : null;
    }
    const already = work.find((p) => p.Status === 'failed');
    if (already) return { phase: already.Name, message: already.Error };
    const message =
      cut.Status === 'running'
        ? 'control plane restarted during this phase'
        : 'control plane restarted before this phase ran';
    await updatePhase(this.db, id, cut.Seq, { status: 'failed', error: message, finishedAt: now() });
    await updateDeployment(this.db, id, { error: `${cut.Name}: ${message}` });
    return { phase: cut.Name, message };
  }

  /** Waits for running deployments (used by tests and shutdown). */
  async idle(): Promise<void> {
    while (this.#running.size) await Promise.allSettled([...this.#running]);
  }
}
