// In-process signals the metrics context listens to (node:diagnostics_channel): the engine and
// the dispatcher publish one message per finished phase and command, and depend on nothing else.
// With no subscriber a publish costs a boolean check.
import { channel } from 'node:diagnostics_channel';

export interface PhaseFinished {
  /** Deployment kind: deploy, fork, snapshot, verify, … */
  kind: string;
  phase: string;
  status: 'ok' | 'skipped' | 'failed';
  ms: number;
}

export interface CommandFinished {
  kind: string;
  ok: boolean;
  ms: number;
}

/** After each warm-pool refill pass: every pool's target size and members. */
export interface PoolState {
  pools: { version: string; size: number; ready: number; starting: number }[];
}

/** One `POST /v1/sandboxes {from_version}`: served from the pool or forked cold. */
export interface PoolClaim {
  warm: boolean;
}

export const phaseFinished = channel('svc:phase-finished');
export const poolState = channel('svc:pool-state');
export const poolClaim = channel('svc:pool-claim');
export const commandFinished = channel('svc:command-finished');
