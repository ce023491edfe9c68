// The project context in a rendered compose file (pure): each bind of a service becomes a
// long-syntax bind of `<context dataset>/files/<source>`; built services name their content tag.
import { CONTEXT_VOLUME, type ServiceRecord } from '../../protocol/spec.ts';
import { DockerError } from './errors.ts';

export function renderBinds(
  svc: ServiceRecord,
  volumePaths: Record<string, string>,
  lit: (s: string) => string,
): Record<string, unknown>[] {
  if (!svc.binds?.length) return [];
  const dataset = volumePaths[CONTEXT_VOLUME];
  if (!dataset?.startsWith('/'))
    throw new DockerError(`service '${svc.name}' mounts files of the project context, which has no dataset`);
  return svc.binds.map((b) => ({
    type: 'bind',
    source: lit(b.source ? `${dataset}/files/${b.source}` : `${dataset}/files`),
    target: lit(b.target),
    read_only: b.read_only,
  }));
}
