// The project context in a rendered compose file (pure): each bind of a service becomes a
// long-syntax bind of its staging path (bind-staging.ts: the checked source, pinned and mounted
// by svcd), never of the source's path in the context, which a running container could swap for
// a link before Docker resolves it.
import type { ServiceRecord } from '../../protocol/spec.ts';
import type { StagedBinds } from './bind-staging.ts';
import { DockerError } from './errors.ts';

export function renderBinds(
  svc: ServiceRecord,
  staged: StagedBinds,
  lit: (s: string) => string,
): Record<string, unknown>[] {
  if (!svc.binds?.length) return [];
  const paths = staged[svc.name];
  if (paths?.length !== svc.binds.length || !paths.every((p) => p.startsWith('/')))
    throw new DockerError(`service '${svc.name}' binds files of the project context that were not staged`);
  return svc.binds.map((b, i) => ({
    type: 'bind',
    source: lit(paths[i]),
    target: lit(b.target),
    read_only: b.read_only,
  }));
}
