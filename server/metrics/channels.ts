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

export const phaseFinished = channel('svc:phase-finished');
export const commandFinished = channel('svc:command-finished');
