// Sidecar builds served to machines that join (spec "Health and releases"). Only the two fixed
// file names are ever opened: the request picks an architecture, never a path.
import { createReadStream, type ReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { BadRequest, NotFound } from '../errors.ts';

export const ARCHES = ['amd64', 'arm64'] as const;
export type Arch = (typeof ARCHES)[number];

/** `uname -m` spellings are accepted too, so an install line can pass `?arch=$(uname -m)`. */
const ALIASES: Record<string, Arch> = { amd64: 'amd64', x86_64: 'amd64', arm64: 'arm64', aarch64: 'arm64' };

export function archOf(query: string | undefined): Arch {
  if (query === undefined || query === '') return 'amd64';
  const arch = ALIASES[query];
  if (!arch) throw new BadRequest(`arch must be amd64 or arm64 (or x86_64, aarch64), got '${query}'`);
  return arch;
}

/** The programs served: the sidecar (spec routes /svcd*) and the CLI (/svc-linux-*). */
export type Program = 'svcd' | 'svc';

export const buildName = (arch: Arch, program: Program = 'svcd'): string => `${program}-linux-${arch}`;

export interface Build {
  name: string;
  size: number;
  stream: ReadStream;
}

/** Opens the build for `arch` from `dir`; 404 when that build is absent. */
export async function openBuild(dir: string, arch: Arch, program: Program = 'svcd'): Promise<Build> {
  const name = buildName(arch, program);
  const path = join(dir, name);
  const st = await stat(path).catch(() => null);
  if (!st?.isFile())
    throw new NotFound(`no ${program === 'svcd' ? 'sidecar' : 'CLI'} build ${name} on this server`);
  return { name, size: st.size, stream: createReadStream(path) };
}
