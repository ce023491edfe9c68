// One compose service → one ServiceRecord (protocol/spec.ts). Keys are either parsed here, refused
// or dropped with a warning (refusals.ts); an unknown key is refused, as compose itself does.
import type { DependsCondition, ServiceRecord } from '../../protocol/spec.ts';
import { parseHealthcheck } from './health.ts';
import { checkImageRef } from './image.ts';
import { parsePorts } from './ports.ts';
import { applyProject, builtFromContext, PROJECT_KEYS, type ProjectHook } from './project.ts';
import {
  type Backings,
  checkRuledKey,
  checkSecretUse,
  DROPPED_SERVICE_KEYS,
  isRuledKey,
} from './refusals.ts';
import { parseResources, parseStorageOpt } from './resources.ts';
import {
  asBool,
  asMap,
  containerPath,
  fail,
  isMap,
  type Node,
  type NodeMap,
  scalarText,
  show,
  stringOrList,
} from './tree.ts';
import { parseServiceVolumes, type VolumeContext } from './volumes.ts';

export interface ServiceContext {
  volumes: VolumeContext;
  secrets: Backings;
  configs: Backings;
  warnings: string[];
  /** The project context (uploaded with the deploy), when there is one. */
  project?: ProjectHook;
}

export interface DependsRef {
  name: string;
  condition: DependsCondition;
  required: boolean;
}

export interface ParsedService {
  record: ServiceRecord;
  deps: DependsRef[];
}

// biome-ignore format: keyword list
const HANDLED = new Set([
  'image', 'build', 'command', 'entrypoint', 'environment', 'ports', 'volumes', 'healthcheck', 'depends_on',
  'user', 'working_dir', 'deploy', 'mem_limit', 'cpus', 'pids_limit', 'profiles', 'secrets', 'configs',
  'storage_opt',
]);

export function parseService(name: string, node: Node, ctx: ServiceContext): ParsedService {
  const where = `service '${name}'`;
  if (node === null) {
    fail(`${where} is empty; it needs at least image:`);
  }
  const svc = asMap(node, where);
  const dropped: string[] = [];
  for (const [key, value] of svc) {
    if (HANDLED.has(key) || (ctx.project && PROJECT_KEYS.has(key))) {
      continue;
    }
    if (isRuledKey(key)) {
      checkRuledKey(name, key, value);
      if (value !== null && value !== false) {
        dropped.push(key);
      }
    } else if (DROPPED_SERVICE_KEYS.has(key) || key.startsWith('x-')) {
      dropped.push(key);
    } else {
      fail(`${where}: unknown key '${key}'`);
    }
  }
  if (svc.has('secrets') && !ctx.project) {
    checkSecretUse(name, 'secrets', svc.get('secrets') ?? null, ctx.secrets);
  }
  if (svc.has('configs') && !ctx.project) {
    checkSecretUse(name, 'configs', svc.get('configs') ?? null, ctx.configs);
  }
  const binds: NonNullable<ServiceRecord['binds']> = [];
  ctx.volumes.binds = binds;
  const record: ServiceRecord = {
    name,
    image: builtFromContext(name, svc, ctx.project?.project) ? '' : parseImage(name, svc, ctx.warnings),
    env: parseEnvironment(name, svc.get('environment'), ctx.warnings),
    ports: parsePorts(svc.get('ports'), `${where}: ports`),
    volumes: parseServiceVolumes(name, svc.get('volumes'), ctx.volumes),
    health: parseHealthcheck(name, svc.get('healthcheck'), ctx.warnings),
    depends_on: {},
    command: stringOrList(svc.get('command'), `${where}: command`),
    entrypoint: stringOrList(svc.get('entrypoint'), `${where}: entrypoint`),
    user: parseUser(name, svc.get('user')),
    working_dir: parseWorkingDir(name, svc.get('working_dir')),
    resources: parseResources(name, svc, ctx.warnings),
  };
  if (ctx.project) applyProject(record, svc, ctx.project, binds, ctx.warnings);
  const layerMb = parseStorageOpt(name, svc.get('storage_opt'), ctx.warnings);
  if (layerMb > 0) record.layer_mb = layerMb;
  if (dropped.length) {
    ctx.warnings.push(`${where}: dropped ${dropped.join(', ')} (the sidecar manages these itself)`);
  }
  return { record, deps: parseDependsOn(name, svc.get('depends_on')) };
}

function parseImage(name: string, svc: NodeMap, warnings: string[]): string {
  const where = `service '${name}'`;
  const hasBuild = svc.get('build') !== undefined && svc.get('build') !== null;
  const image = svc.get('image');
  if (image === undefined || image === null) {
    if (hasBuild) {
      fail(
        `${where}: build: without image: needs the project's files; deploy with its context ` +
          "(`svc deploy` uploads the compose file's directory) or build and push the image, then set image: to it",
      );
    }
    fail(
      `${where} has no image:; every service needs an image to pull (override fragments are not supported)`,
    );
  }
  const ref = scalarText(image, `${where}: image`).trim();
  if (ref === '') {
    fail(`${where}: image: is empty (is a variable unset?)`);
  }
  checkImageRef(ref, `${where}: image`);
  if (hasBuild) {
    warnings.push(`${where}: build: ignored; the image '${ref}' is pulled instead`);
  }
  return ref;
}

const ENV_KEY = /^[^\s=\0]+$/;

function parseEnvironment(name: string, node: Node | undefined, warnings: string[]): Record<string, string> {
  const where = `service '${name}': environment`;
  const entries: [string, string][] = [];
  const passThrough: string[] = [];
  const add = (key: string, value: string | null) => {
    if (!ENV_KEY.test(key)) {
      fail(`${where}: '${key}' is not a variable name`);
    }
    if (value === null) {
      passThrough.push(key);
    } else if (value.includes('\0')) {
      fail(`${where}: the value of ${key} contains a NUL byte`);
    } else {
      entries.push([key, value]);
    }
  };
  if (Array.isArray(node)) {
    node.forEach((item, i) => {
      const text = scalarText(item, `${where}[${i}]`);
      const eq = text.indexOf('=');
      add(eq < 0 ? text.trim() : text.slice(0, eq), eq < 0 ? null : text.slice(eq + 1));
    });
  } else {
    for (const [key, value] of asMap(node, where)) {
      if (value !== null && (isMap(value) || Array.isArray(value))) {
        fail(`${where}.${key} must be a string, got ${show(value)}`);
      }
      add(key, value === null ? null : scalarText(value, `${where}.${key}`));
    }
  }
  if (passThrough.length) {
    warnings.push(
      `${where}: dropped ${passThrough.join(', ')} (no value given; the server has no shell environment to pass on)`,
    );
  }
  // fromEntries defines own properties, so a key such as __proto__ stays an ordinary variable.
  return Object.fromEntries(entries);
}

function parseUser(name: string, node: Node | undefined): string {
  if (node === undefined || node === null) {
    return '';
  }
  const user = scalarText(node, `service '${name}': user`).trim();
  if (user !== '' && !/^[A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?$/.test(user)) {
    fail(`service '${name}': user: '${user}' is not a user; write '<uid>:<gid>' or a user name`);
  }
  return user;
}

function parseWorkingDir(name: string, node: Node | undefined): string {
  if (node === undefined || node === null) {
    return '';
  }
  return containerPath(scalarText(node, `service '${name}': working_dir`), `service '${name}': working_dir`);
}

const CONDITIONS = new Set<string>(['service_started', 'service_healthy', 'service_completed_successfully']);

function parseDependsOn(name: string, node: Node | undefined): DependsRef[] {
  const where = `service '${name}': depends_on`;
  if (node === undefined || node === null) {
    return [];
  }
  if (Array.isArray(node)) {
    const names = node.map((item, i) => scalarText(item, `${where}[${i}]`));
    return [...new Set(names)].map((dep) => ({ name: dep, condition: 'service_started', required: true }));
  }
  return [...asMap(node, where)].map(([dep, value]) => {
    const opts = asMap(value, `${where}.${dep}`);
    for (const key of opts.keys()) {
      if (!['condition', 'required', 'restart'].includes(key) && !key.startsWith('x-')) {
        fail(`${where}.${dep}: unknown key '${key}'`);
      }
    }
    const condition = opts.has('condition')
      ? scalarText(opts.get('condition'), `${where}.${dep}.condition`)
      : 'service_started';
    if (!CONDITIONS.has(condition)) {
      fail(
        `${where}.${dep}.condition: '${condition}' is not service_started, service_healthy or service_completed_successfully`,
      );
    }
    const required = opts.has('required') ? asBool(opts.get('required'), `${where}.${dep}.required`) : true;
    return { name: dep, condition: condition as DependsCondition, required };
  });
}

/** Resolves depends_on against the services that start; refuses missing services and cycles. */
export function linkDependencies(parsed: ParsedService[], leftOut: Set<string>, warnings: string[]): void {
  const names = new Set(parsed.map((p) => p.record.name));
  for (const { record, deps } of parsed) {
    const where = `service '${record.name}': depends_on`;
    const kept: [string, { condition: DependsCondition }][] = [];
    for (const dep of deps) {
      if (dep.name === record.name) {
        fail(`${where}: a service cannot depend on itself`);
      }
      if (names.has(dep.name)) {
        kept.push([dep.name, { condition: dep.condition }]);
      } else if (!dep.required) {
        warnings.push(`${where}: dropped '${dep.name}' (required: false and not started)`);
      } else if (leftOut.has(dep.name)) {
        fail(
          `${where}: '${dep.name}' is left out by its profiles:; remove profiles: from '${dep.name}' or this dependency`,
        );
      } else {
        fail(`${where}: service '${dep.name}' does not exist`);
      }
    }
    record.depends_on = Object.fromEntries(kept);
  }
  checkCycles(parsed.map((p) => p.record));
}

function checkCycles(records: ServiceRecord[]): void {
  const byName = new Map(records.map((r) => [r.name, r]));
  const state = new Map<string, 'open' | 'done'>();
  const visit = (name: string, trail: string[]): void => {
    if (state.get(name) === 'done') {
      return;
    }
    if (state.get(name) === 'open') {
      fail(`depends_on forms a cycle: ${[...trail.slice(trail.indexOf(name)), name].join(' -> ')}`);
    }
    state.set(name, 'open');
    for (const dep of Object.keys(byName.get(name)?.depends_on ?? {})) {
      visit(dep, [...trail, name]);
    }
    state.set(name, 'done');
  };
  for (const r of records) {
    visit(r.name, []);
  }
}
