// The compose parser of the control plane. `parseCompose` turns a user's compose file into the
// EnvSpec a version stores and a host runs; a refusal is a ComposeError whose message (always
// starting `compose: `) becomes the HTTP 400 reason. `imageSandboxSpec` builds the spec of the
// `POST /v1/sandboxes` image form.
import type { EnvSpec } from '../../protocol/spec.ts';
import type { ProjectContext } from './context.ts';
import { loadCompose } from './load.ts';
import { checkPublishedConflicts } from './ports.ts';
import { checkProjectSpec, projectHook, projectVariables } from './project-spec.ts';
import { checkTopLevel, parseBackings } from './refusals.ts';
import { linkDependencies, type ParsedService, parseService } from './services.ts';
import { asList, asMap, fail, NAME_RE, type Node } from './tree.ts';
import { resolveVerifierTests } from './verifier-tests.ts';
import { parseVolumeDeclarations, type VolumeContext } from './volumes.ts';
import { parseExtensions } from './xsvc.ts';

export { emptyContext, type ProjectContext } from './context.ts';
export { checkImageRef, type ImageSandboxInput, imageSandboxSpec } from './image.ts';
export { MAX_COMPOSE_BYTES } from './load.ts';
export { ComposeError } from './tree.ts';

export const MAX_SERVICES = 500;

export interface ParseOptions {
  /** Variables for `${VAR}` interpolation. Nothing else is consulted. */
  env?: Record<string, string>;
  /**
   * The uploaded project directory: `.env` adds interpolation variables (those in `env` win), and
   * relative binds, env_file:, file secrets and build: are served from it.
   */
  project?: ProjectContext;
}

export interface ParsedCompose {
  spec: EnvSpec;
  /** Things dropped or ignored, one sentence each, for the deploy response and logs. */
  warnings: string[];
}

export function parseCompose(text: string, opts: ParseOptions = {}): ParsedCompose {
  const env = opts.env ?? {};
  if (typeof env !== 'object' || env === null) {
    fail('interpolation variables must be an object');
  }
  const warnings: string[] = [];
  const { root, unset } = loadCompose(text, projectVariables(opts.project, env));
  if (unset.length) {
    warnings.push(`variables not set, replaced by an empty string: ${unset.join(', ')}`);
  }

  const droppedTop = checkTopLevel(root);
  const declared = parseVolumeDeclarations(root.get('volumes'), warnings);
  const secrets = parseBackings(root.get('secrets'), 'secrets');
  const configs = parseBackings(root.get('configs'), 'configs');
  const { active, leftOut } = selectServices(root.get('services'), warnings);

  const project = projectHook(root, opts.project);
  const volumes: VolumeContext = { declared, used: new Set(), warnings, project: opts.project };
  const parsed: ParsedService[] = active.map(([name, node]) =>
    parseService(name, node, { volumes, secrets, configs, warnings, project }),
  );
  linkDependencies(parsed, leftOut, warnings);
  const services = parsed.map((p) => p.record);
  checkPublishedConflicts(services);
  const ext = parseExtensions(root, services, leftOut);
  resolveVerifierTests(ext.verifier, opts.project);

  if (droppedTop.length) {
    warnings.push(`dropped top-level ${droppedTop.join(', ')} (the sidecar manages these itself)`);
  }
  const unused = [...declared].filter((v) => !volumes.used.has(v));
  if (unused.length) {
    warnings.push(`dropped unused volumes ${unused.join(', ')}`);
  }
  if (ext.egress === 'deny' && services.some((s) => s.ports.length > 0)) {
    warnings.push(
      'ports are not published while x-svc.egress is deny (set x-svc.egress: allow to publish them)',
    );
  }
  const spec: EnvSpec = {
    services,
    volumes: [...volumes.used],
    egress: ext.egress,
    agent: ext.agent,
    verifier: ext.verifier,
    disk_mb: ext.disk_mb,
    ...(ext.runtime ? { runtime: ext.runtime } : {}),
  };
  if (opts.project) checkProjectSpec(spec, declared);
  return { spec, warnings };
}

/** File order; services behind `profiles:` do not start by default in compose, so they are left out. */
function selectServices(node: Node | undefined, warnings: string[]) {
  if (node === undefined || node === null) {
    fail('no services: a compose file needs at least one service under services:');
  }
  const all = asMap(node, 'services');
  if (all.size === 0) {
    fail('no services: a compose file needs at least one service under services:');
  }
  if (all.size > MAX_SERVICES) {
    fail(`${all.size} services declared; the limit is ${MAX_SERVICES}`);
  }
  const active: [string, Node][] = [];
  const leftOut = new Set<string>();
  for (const [name, svc] of all) {
    if (!NAME_RE.test(name)) {
      fail(
        `service name '${name.slice(0, 64)}' must start with a letter or digit and use only letters, digits, _ . - (at most 63)`,
      );
    }
    const profiles = svc instanceof Map ? asList(svc.get('profiles'), `service '${name}': profiles`) : [];
    if (profiles.length > 0) {
      leftOut.add(name);
    } else {
      active.push([name, svc]);
    }
  }
  if (leftOut.size) {
    warnings.push(`left out services behind profiles: ${[...leftOut].join(', ')}`);
  }
  if (active.length === 0) {
    fail('every service is behind profiles:, so nothing would start; remove profiles: from at least one');
  }
  return { active, leftOut };
}
