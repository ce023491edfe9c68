// Starter compose files (spec "Projects", GET /v1/templates). The compose texts live next to this
// file as real YAML so they can be read, diffed and deployed as they are.
import { readFileSync } from 'node:fs';
import { BadRequest } from '../errors.ts';
import { PROJECT_KINDS, type ProjectKind } from './store.ts';

export interface Template {
  name: string;
  kind: ProjectKind;
  description: string;
  /** What the host needs (capability names of a sidecar host). */
  requires?: string[];
  compose: string;
  /** The deploy's warm argv; it runs in the first service after health. */
  warm?: string[];
}

const read = (file: string) => readFileSync(new URL(`./templates/${file}`, import.meta.url), 'utf8');

/**
 * The warm argv has no whitespace inside any word, so `svc deploy --warm '<argv joined>'` (which
 * splits on whitespace) passes it unchanged. The task script itself is the main service's
 * TASK_SETUP variable; `${IFS}` is the shell's own word separator.
 */
// biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, not a template.
const OPS_WARM = ['sh', '-c', 'eval${IFS}"$TASK_SETUP"'];

export const TEMPLATES: readonly Template[] = [
  {
    name: 'rl-environment-ops',
    kind: 'rl-environment',
    description:
      'An operations task: a non-root agent service (main) beside Postgres (db) and Redis (cache), ' +
      'no internet, a warm step that writes the task into /work, and a separate verifier that ' +
      'grades a frozen copy of /work.',
    requires: ['docker', 'compose'],
    compose: read('rl-environment-ops.yaml'),
    warm: OPS_WARM,
  },
  {
    name: 'agent-runtime',
    kind: 'agent',
    description:
      'One long-lived container for an agent: non-root, internet access, persistent and forkable ' +
      '/work, and a verifier that checks the result the agent left there.',
    requires: ['docker'],
    compose: read('agent-runtime.yaml'),
  },
];

export function listTemplates(kind: string | undefined): { kinds: ProjectKind[]; templates: Template[] } {
  if (kind !== undefined && !(PROJECT_KINDS as readonly string[]).includes(kind)) {
    throw new BadRequest(`kind must be one of ${PROJECT_KINDS.join(', ')}`);
  }
  return {
    kinds: [...PROJECT_KINDS],
    templates: TEMPLATES.filter((t) => kind === undefined || t.kind === kind),
  };
}
