// Results come from outside (a sidecar or a provider): check the fields the orchestrator reads
// before anything trusts them, so a malformed result fails its phase with a clear reason.
import type { CommandKind } from '../../protocol/commands.ts';

type Check = [field: string, type: 'string' | 'number' | 'object' | 'array' | 'number|null'];

const REQUIRED: Partial<Record<CommandKind, Check[]>> = {
  'host.report': [['capabilities', 'object']],
  'env.create': [
    ['endpoints', 'object'],
    ['started_in', 'number'],
  ],
  'env.snapshot': [
    ['snapshot', 'string'],
    ['frozen_for', 'number'],
  ],
  'env.fork': [
    ['forked_in', 'number'],
    ['endpoints', 'object'],
  ],
  'env.rollback': [['snapshot', 'string']],
  'env.exec': [
    ['exit_code', 'number'],
    ['stdout', 'string'],
    ['stderr', 'string'],
  ],
  'env.get': [['tar_b64', 'string']],
  'env.pause': [['services', 'array']],
  'env.unpause': [['services', 'array']],
  'verify.collect': [
    ['files', 'number'],
    ['bytes', 'number'],
    ['missing', 'array'],
    ['refused', 'array'],
  ],
  'verify.run': [
    ['reward', 'number|null'],
    ['source', 'string'],
  ],
};

function is(value: unknown, type: Check[1]): boolean {
  switch (type) {
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    case 'number|null':
      return value === null || (typeof value === 'number' && Number.isFinite(value));
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    default:
      return typeof value === type;
  }
}

export function checkResult(kind: CommandKind, result: unknown): unknown {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw new Error(`malformed ${kind} result: not an object`);
  }
  for (const [field, type] of REQUIRED[kind] ?? []) {
    const value = (result as Record<string, unknown>)[field];
    if (!is(value, type)) throw new Error(`malformed ${kind} result: ${field} must be ${type}`);
  }
  return result;
}
