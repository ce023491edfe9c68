// promote is declared by the spec (gate phases, apply, verdict) but no route starts it; its
// phases fail clearly if it were ever run, rather than pretending to promote anything.
import { Type } from '@sinclair/typebox';
import { defineKind } from '../engine.ts';

const notAvailable = async () => {
  throw new Error('promote is not available');
};

export const PROMOTE_PHASES = [
  'gate.fork',
  'gate.consistency',
  'gate.replay',
  'gate.invariants',
  'gate.soak',
  'apply',
];

export const promoteKind = defineKind({
  kind: 'promote',
  params: Type.Object({}),
  phases: PROMOTE_PHASES.map((name) => ({ name, run: notAvailable })),
  verdict: async () => ({ status: 'failed', evidence: null }),
});
