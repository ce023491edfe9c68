// The sidecar's identity file (spec "Sidecar program"): server, host id, secret, data dir and
// ZFS pool, mode 0600, written atomically so a crash never leaves half an identity.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { writeFileAtomicSync } from '../shared/atomic-file.ts';

export interface HostState {
  server: string;
  host_id: string;
  secret: string;
  data_dir: string;
  zfs_pool: string;
}

export class StateError extends Error {}

export function loadState(path: string): HostState | null {
  if (!existsSync(path)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new StateError(`state file ${path} is not valid JSON: ${(err as Error).message}`);
  }
  const s = raw as Partial<HostState>;
  for (const key of ['server', 'host_id', 'secret', 'data_dir', 'zfs_pool'] as const) {
    if (typeof s[key] !== 'string') throw new StateError(`state file ${path}: ${key} must be a string`);
  }
  return s as HostState;
}

export function saveState(path: string, state: HostState): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileAtomicSync(path, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}
