// Env ids, volume names and snapshot names become path components and ZFS dataset names, so they
// are checked before anything touches the disk: bad input changes nothing.
import { BadName } from './errors.ts';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
/** ZFS caps a full dataset name at 255 bytes; three names plus the pool must fit. */
export const MAX_NAME_LENGTH = 64;

export type NameKind = 'env id' | 'volume name' | 'snapshot name';

export function checkName(kind: NameKind, value: unknown): string {
  if (typeof value !== 'string' || value === '') throw new BadName(`${kind} must be a non-empty string`);
  if (value.length > MAX_NAME_LENGTH)
    throw new BadName(`${kind} '${value.slice(0, 80)}' is longer than ${MAX_NAME_LENGTH} characters`);
  // The pattern already excludes '/', '..' as a whole name and leading dots (our temp names).
  if (!NAME.test(value))
    throw new BadName(`${kind} '${value}' must match [A-Za-z0-9][A-Za-z0-9_.-]* (no path separators)`);
  return value;
}

export function checkVolumes(volumes: unknown): string[] {
  if (!Array.isArray(volumes)) throw new BadName('volumes must be an array of names');
  const seen = new Set<string>();
  for (const v of volumes) {
    checkName('volume name', v);
    if (seen.has(v)) throw new BadName(`volume '${v}' is listed twice`);
    seen.add(v);
  }
  return volumes as string[];
}

/** A clone goes into a different env; into the same one it would be a rollback. */
export function checkCloneTarget(fromEnv: string, toEnv: string): void {
  checkName('env id', fromEnv);
  checkName('env id', toEnv);
  if (fromEnv === toEnv) throw new BadName(`cannot clone env ${fromEnv} into itself; use rollback`);
}
