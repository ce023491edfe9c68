// Resource limits from `deploy.resources.limits`, `mem_limit`, `cpus` and `pids_limit`.
// Zero means "the sidecar default" (protocol/spec.ts DEFAULT_RESOURCES).
import type { Resources } from '../../protocol/spec.ts';
import { asInt, asMap, fail, type Node, type NodeMap, scalarText, show } from './tree.ts';

const DEPLOY_KEYS = new Set([
  'mode',
  'endpoint_mode',
  'replicas',
  'labels',
  'rollback_config',
  'update_config',
  'resources',
  'restart_policy',
  'placement',
]);
const UNITS: Record<string, number> = { '': 0, k: 1, m: 2, g: 3, t: 4, p: 5 };
const MAX_MEMORY_MB = 16 * 1024 * 1024;

/** Memory as compose writes it ('512m', '1g', '50M', '1.5GiB', 1073741824) → MiB, rounded up. */
export function memoryMb(node: Node, where: string): number {
  const text = scalarText(node, where).trim();
  const m = text.length <= MAX_NUMBER_CHARS ? /^(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b)?$/i.exec(text) : null;
  if (!m) {
    fail(
      `${where}: ${show(text)} is not a memory size; write bytes or a number with b, k, m or g (like 512m or 1g)`,
    );
  }
  const bytes = Number(m[1]) * 1024 ** UNITS[m[2].toLowerCase()];
  const mb = Math.ceil(bytes / 1024 / 1024);
  if (!Number.isFinite(mb) || mb > MAX_MEMORY_MB) {
    fail(`${where}: '${text}' is larger than 16 TiB`);
  }
  // The container engine refuses limits under 6 MiB; zero stays "the sidecar default".
  if (mb > 0 && mb < 6) {
    fail(`${where}: '${text}' is below the 6m minimum a container can be limited to`);
  }
  return mb;
}

/**
 * `2`, `0.5`, `.5`: checked without a backtracking pattern and only up to a sane length, so hostile
 * input cannot make the check slow.
 */
const CPUS_TEXT = /^(?:\d+|\d*\.\d+)$/;
const MAX_NUMBER_CHARS = 32;

function cpuCount(node: Node, where: string): number {
  const text = typeof node === 'string' ? node.trim() : '';
  const n = text.length <= MAX_NUMBER_CHARS && CPUS_TEXT.test(text) ? Number(text) : node;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0 || n > 1024) {
    fail(`${where}: must be a number of cpus from 0 to 1024, like 0.5 or 2`);
  }
  if (n > 0 && n < 0.01) {
    fail(`${where}: ${n} is below the 0.01 cpus a container can be limited to`);
  }
  return n;
}

function pidCount(node: Node, where: string): number {
  const n = asInt(node, where, -1, 4_194_304);
  // -1 is compose's "unlimited"; the sidecar always caps, so it means "the default".
  return Math.max(n, 0);
}

/** One limit given in two places must agree, as compose itself insists. */
function pick(a: number | null, b: number | null, what: string, where: string): number {
  if (a !== null && b !== null && a !== b) {
    fail(`${where}: ${what} and deploy.resources.limits disagree (${a} vs ${b})`);
  }
  return a ?? b ?? 0;
}

/** `prefix` ends with ':' (a service key) or names the parent mapping (`deploy.resources.limits`). */
function opt<T>(map: NodeMap, key: string, read: (node: Node, where: string) => T, prefix: string): T | null {
  const node = map.get(key);
  return node === undefined || node === null
    ? null
    : read(node, prefix.endsWith(':') ? `${prefix} ${key}` : `${prefix}.${key}`);
}

export function parseResources(service: string, svc: NodeMap, warnings: string[]): Resources {
  const where = `service '${service}'`;
  const limits = deployLimits(service, svc.get('deploy'), warnings);
  return {
    memory_mb: pick(
      opt(svc, 'mem_limit', memoryMb, `${where}:`),
      opt(limits, 'memory', memoryMb, `${where}: deploy.resources.limits`),
      'mem_limit',
      where,
    ),
    cpus: pick(
      opt(svc, 'cpus', cpuCount, `${where}:`),
      opt(limits, 'cpus', cpuCount, `${where}: deploy.resources.limits`),
      'cpus',
      where,
    ),
    pids: pick(
      opt(svc, 'pids_limit', pidCount, `${where}:`),
      opt(limits, 'pids', pidCount, `${where}: deploy.resources.limits`),
      'pids_limit',
      where,
    ),
  };
}

function deployLimits(service: string, node: Node | undefined, warnings: string[]): NodeMap {
  const where = `service '${service}': deploy`;
  const deploy = asMap(node, where);
  const dropped: string[] = [];
  for (const [key, value] of deploy) {
    if (key.startsWith('x-')) {
      continue;
    }
    if (!DEPLOY_KEYS.has(key)) {
      fail(`${where}: unknown key '${key}'`);
    }
    if (key === 'replicas') {
      const replicas = asInt(value, `${where}.replicas`, 0, 1000);
      if (replicas !== 1) {
        dropped.push(`replicas (${replicas}; one container runs per service)`);
      }
    } else if (key !== 'resources') {
      dropped.push(key);
    }
  }
  const resources = asMap(deploy.get('resources'), `${where}.resources`);
  for (const key of resources.keys()) {
    if (key !== 'limits' && key !== 'reservations' && !key.startsWith('x-')) {
      fail(`${where}.resources: unknown key '${key}'`);
    }
  }
  const reservations = asMap(resources.get('reservations'), `${where}.resources.reservations`);
  if (reservations.has('devices')) {
    fail(
      `${where}.resources.reservations.devices is refused; devices and GPUs are not passed through: remove it`,
    );
  }
  if (reservations.size > 0) {
    dropped.push('resources.reservations');
  }
  const limits = asMap(resources.get('limits'), `${where}.resources.limits`);
  for (const key of limits.keys()) {
    if (!['memory', 'cpus', 'pids'].includes(key) && !key.startsWith('x-')) {
      fail(`${where}.resources.limits: unknown key '${key}'`);
    }
  }
  if (dropped.length) {
    warnings.push(`${where}: dropped ${dropped.join(', ')}`);
  }
  return limits;
}

/**
 * `storage_opt: {size: …}`: a bound on the container's writable layer, in MiB. The sidecar passes it
 * to the engine where the engine can enforce it (overlay2 on XFS with project quotas) and says so
 * where it cannot; other storage_opt keys are dropped with a warning. 0 when unset.
 */
export function parseStorageOpt(service: string, node: Node | undefined, warnings: string[]): number {
  if (node === undefined || node === null) return 0;
  const where = `service '${service}': storage_opt`;
  let size = 0;
  for (const [key, value] of asMap(node, where)) {
    if (key === 'size') size = memoryMb(value, `${where}.size`);
    else warnings.push(`${where}: dropped ${key} (only size is honoured)`);
  }
  return size;
}
