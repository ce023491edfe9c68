// What a deployment kind is: its phases, its verdict, the schema of the params it persists, and
// the context every phase runs with (deployments/engine.ts runs them).
import { createHash } from 'node:crypto';
import type { TObject } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { PREFIX } from '../../protocol/ids.ts';
import { type Environment, getEnv, getVersion, type Version } from '../envs/store.ts';
import type { CommandTarget } from '../hosts/dispatcher.ts';
import type { OrchestratorDeps } from './deps.ts';
import type { Deployment, DeploymentStatus, NewDeployment } from './store.ts';

/** Returned by a phase that this deployment does not need; its evidence says why. */
export class Skip {
  readonly evidence: unknown;
  constructor(evidence: unknown = null) {
    this.evidence = evidence;
  }
}

/** A phase failure that still has evidence to record (e.g. a warm command's exit and stderr). */
export class PhaseFailure extends Error {
  readonly evidence: unknown;
  constructor(message: string, evidence: unknown) {
    super(message);
    this.evidence = evidence;
  }
}

export interface PhaseContext<I = unknown, P extends object = Record<string, unknown>> {
  deps: OrchestratorDeps;
  dep: Deployment & { TeamID: string };
  /** Persisted with the deployment after every phase, so a verdict after a restart can read it. */
  params: P;
  /** In-memory input from the request (e.g. the parsed spec); absent when recovering. */
  input: I | null;
  startedAt: number;
  /** Aborted when the running phase (or verdict) reaches its time limit: pass it to every command. */
  signal: AbortSignal;
  /** The deployment's environment; throws when it no longer exists. */
  env(): Promise<Environment>;
  /** The deployment's version; throws `missing` when it does not exist. */
  version(missing?: string): Promise<Version>;
  /** The command target for a host of the deployment's team; throws when it cannot take commands. */
  target(hostId: string): Promise<CommandTarget>;
  /**
   * Set while the verdict runs: the id of its next command, the same each time the verdict runs
   * (a replica that adopted the deployment runs it again), so the host answers a resent cleanup
   * from what it kept instead of running it twice.
   */
  commandId?: (kind: string, payload: unknown) => string;
}

/** The ids `commandId` gives: the n-th command of `key` (a deployment's verdict), its kind and payload. */
export function stableCommandIds(key: string): (kind: string, payload: unknown) => string {
  let n = 0;
  return (kind, payload) => {
    const h = createHash('sha256').update(`${key}\n${++n}\n${kind}\n${JSON.stringify(payload)}`);
    return `${PREFIX.command}${h.digest('hex').slice(0, 32)}`;
  };
}

/** Any phase context, whatever its kind's input and params: what helpers shared by kinds take. */
export type AnyPhaseContext = PhaseContext<unknown, object>;

export interface Failure {
  phase: string;
  message: string;
}

export interface Verdict {
  status: Exclude<DeploymentStatus, 'pending' | 'running'>;
  evidence: unknown;
}

export interface PhaseDef<I, P extends object = Record<string, unknown>> {
  name: string;
  run(ctx: PhaseContext<I, P>): Promise<unknown>;
}

/**
 * A kind: its phases, its verdict, and the schema of the params it persists with the deployment
 * (checked whenever they are read back, e.g. after a control-plane restart).
 */
export interface KindDef<I, P extends object = Record<string, unknown>> {
  kind: NewDeployment['kind'];
  /** Its static type is the params type, so the schema and the phases cannot disagree. */
  params: TObject & { static: P };
  phases: readonly PhaseDef<I, P>[];
  verdict(ctx: PhaseContext<I, P>, failure: Failure | null): Promise<Verdict>;
}

/** Declares a kind; the params type is the schema's. */
export const defineKind = <I, P extends object>(k: KindDef<I, P>): KindDef<I, P> => k;

export const phaseNames = (k: { phases: readonly { name: string }[] }): string[] => [
  ...k.phases.map((p) => p.name),
  'verdict',
];

const checkers = new WeakMap<TObject, ReturnType<typeof TypeCompiler.Compile>>();

/** The persisted params, checked against the kind's schema (compiled once per kind). */
export function checkedParams(
  kind: KindDef<unknown>,
  params: Record<string, unknown>,
): Record<string, unknown> {
  let check = checkers.get(kind.params);
  if (!check) {
    check = TypeCompiler.Compile(kind.params);
    checkers.set(kind.params, check);
  }
  const bad = check.Errors(params).First();
  if (bad) throw new Error(`${kind.kind} params do not match the kind: ${bad.path || '/'} ${bad.message}`);
  return { ...params };
}

/** The context a deployment's phases and verdict run with. */
export function phaseContext(
  deps: OrchestratorDeps,
  dep: Deployment & { TeamID: string },
  params: Record<string, unknown>,
  input: unknown,
): PhaseContext<unknown> {
  return {
    deps,
    dep,
    params,
    input,
    startedAt: Date.now(),
    signal: new AbortController().signal,
    async env() {
      const env = await getEnv(deps.db, dep.TeamID, dep.EnvID);
      if (!env) throw new Error('environment no longer exists');
      return env;
    },
    async version(missing = 'version is gone') {
      const v = await getVersion(deps.db, dep.TeamID, dep.VersionID);
      if (!v) throw new Error(missing);
      return v;
    },
    target: (hostId) => deps.targets.of(dep.TeamID, hostId),
  };
}
