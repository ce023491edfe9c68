// Volumes. Only named volumes exist in a spec: each becomes a dataset on the host that snapshots
// and forks with the environment. Host paths never reach a container; anonymous volumes get a
// stable derived name so they snapshot too.
import { createHash } from 'node:crypto';
import type { BindMount } from '../../protocol/spec.ts';
import type { ProjectContext } from './context.ts';
import { contextBind } from './project-files.ts';
import {
  asBool,
  asMap,
  containerPath,
  fail,
  isMap,
  NAME_RE,
  type Node,
  type NodeMap,
  scalarText,
  show,
} from './tree.ts';

export const BIND_WAY_OUT =
  'host paths are never mounted: use a named volume (named volumes are datasets that snapshot and fork) ' +
  'and copy files in with `svc files put`, or deploy with the project context (`svc deploy` uploads the ' +
  "compose file's directory) to mount its files with a relative path (./dir:/path)";

/** What the service volume parser needs to know and records while it runs. */
export interface VolumeContext {
  declared: Set<string>;
  /** Named volumes in order of first use. */
  used: Set<string>;
  warnings: string[];
  /** With a project context, relative binds mount its files; they are collected in `binds`. */
  project?: ProjectContext;
  binds?: BindMount[];
}

/** A host path the project context can serve: relative, not absolute or home. */
const isRelative = (source: string) =>
  !source.startsWith('/') && !source.startsWith('~') && !/^[a-zA-Z]:\\/.test(source);

const DECL_KEYS = new Set(['driver', 'driver_opts', 'external', 'labels', 'name']);

/** The top-level `volumes:` declarations. */
export function parseVolumeDeclarations(node: Node | undefined, warnings: string[]): Set<string> {
  const declared = new Set<string>();
  for (const [name, decl] of asMap(node, 'volumes')) {
    const where = `volume '${name}'`;
    if (!NAME_RE.test(name)) {
      fail(`${where}: a volume name must match ${NAME_RE.source}`);
    }
    const map = asMap(decl, where);
    for (const [key, value] of map) {
      if (key.startsWith('x-')) {
        continue;
      }
      if (!DECL_KEYS.has(key)) {
        fail(`${where}: unknown key '${key}'`);
      }
      if (key === 'external' && (isMap(value) || asBool(value, `${where}.external`))) {
        fail(
          `${where}: external: is refused; every volume is a dataset the environment owns so it can snapshot ` +
            'and fork: remove external: and copy the data in with `svc files put`',
        );
      }
      if (key === 'driver' && value !== null && scalarText(value, `${where}.driver`) !== 'local') {
        fail(
          `${where}: driver '${scalarText(value, key)}' is refused; the sidecar stores every volume as a dataset: remove driver:`,
        );
      }
      if (key === 'driver_opts' && asMap(value, `${where}.driver_opts`).size > 0) {
        refuseDriverOpts(where, value as NodeMap);
      }
    }
    for (const dropped of ['labels', 'name'].filter((k) => map.has(k))) {
      warnings.push(`${where}: dropped ${dropped}: (the dataset is named after the key '${name}')`);
    }
    declared.add(name);
  }
  return declared;
}

function refuseDriverOpts(where: string, opts: NodeMap): never {
  const o = String(opts.get('o') ?? '');
  if (/\bbind\b/.test(o) || opts.has('device')) {
    fail(
      `${where}: driver_opts make it a bind mount of '${String(opts.get('device') ?? '')}'; ${BIND_WAY_OUT}`,
    );
  }
  return fail(
    `${where}: driver_opts are refused; the sidecar stores every volume as a dataset: remove driver_opts:`,
  );
}

/** A service's `volumes:`; returns '<volume>:<path>[:ro]' entries. */
export function parseServiceVolumes(service: string, node: Node | undefined, ctx: VolumeContext): string[] {
  if (node === undefined || node === null) {
    return [];
  }
  const where = `service '${service}': volumes`;
  if (!Array.isArray(node)) {
    fail(`${where} must be a list, got ${show(node)}`);
  }
  const out: string[] = [];
  const targets = new Set<string>();
  node.forEach((item, i) => {
    const mount = isMap(item)
      ? longVolume(service, item, ctx, `${where}[${i}]`)
      : shortVolume(service, item, ctx);
    if (mount === null) {
      return;
    }
    if (targets.has(mount.target)) {
      fail(`${where}: two volumes are mounted at ${mount.target}`);
    }
    targets.add(mount.target);
    if (mount.bind) {
      ctx.binds?.push(mount.bind);
      return;
    }
    out.push(`${mount.volume}:${mount.target}${mount.readOnly ? ':ro' : ''}`);
  });
  return out;
}

interface Mount {
  volume: string;
  target: string;
  readOnly: boolean;
  bind?: BindMount;
}

function projectBind(
  ctx: VolumeContext,
  raw: string,
  target: string,
  readOnly: boolean,
  where: string,
): Mount {
  const bind = contextBind(ctx.project as ProjectContext, raw, target, readOnly, where, ctx.warnings);
  return { volume: '', target, readOnly, bind };
}

const HARMLESS_MODES = new Set(['rw', 'z', 'Z', 'nocopy', 'consistent', 'cached', 'delegated']);
const PROPAGATION = new Set(['shared', 'slave', 'private', 'rshared', 'rslave', 'rprivate']);

function shortVolume(service: string, item: Node, ctx: VolumeContext): Mount {
  const raw = scalarText(item, `service '${service}': volumes`);
  const where = `service '${service}': volumes '${raw}'`;
  const parts = raw.split(':');
  if (parts.length > 3) {
    fail(`${where}: expected <volume>:<path>[:ro]`);
  }
  if (parts.length === 1) {
    return anonymous(service, containerPath(raw.trim(), where), false, ctx);
  }
  const [source, target, mode = ''] = parts;
  if (source === '' || target === '') {
    fail(`${where}: the volume or the path is empty (is a variable unset?); expected <volume>:<path>[:ro]`);
  }
  if (isHostPath(source) && ctx.project && isRelative(source)) {
    return projectBind(ctx, source, containerPath(target, where), mode.split(',').includes('ro'), where);
  }
  if (isHostPath(source)) {
    fail(`service '${service}': volumes: '${raw}' is a host bind mount; ${BIND_WAY_OUT}`);
  }
  const modes = mode === '' ? [] : mode.split(',');
  for (const m of modes) {
    if (m !== 'ro' && !HARMLESS_MODES.has(m) && !PROPAGATION.has(m)) {
      fail(`${where}: unknown mode '${m}'`);
    }
  }
  const ignored = modes.filter((m) => m !== 'ro' && m !== 'rw');
  if (ignored.length) {
    ctx.warnings.push(`${where}: dropped mode ${ignored.join(',')}`);
  }
  return named(service, source, containerPath(target, where), modes.includes('ro'), ctx);
}

function isHostPath(source: string): boolean {
  return /^[./~]/.test(source) || source.includes('/') || /^[a-zA-Z]:\\/.test(source);
}

const LONG_KEYS = new Set([
  'type',
  'source',
  'target',
  'read_only',
  'consistency',
  'bind',
  'volume',
  'tmpfs',
  'image',
]);

function longVolume(service: string, item: NodeMap, ctx: VolumeContext, where: string): Mount | null {
  for (const key of item.keys()) {
    if (!LONG_KEYS.has(key) && !key.startsWith('x-')) {
      fail(`${where}: unknown key '${key}'`);
    }
  }
  const type = scalarText(item.get('type') ?? 'volume', `${where}.type`);
  const source =
    item.has('source') && item.get('source') !== null
      ? scalarText(item.get('source'), `${where}.source`)
      : '';
  const target = containerPath(scalarText(item.get('target'), `${where}.target`), where);
  const readOnly = asBool(item.get('read_only'), `${where}.read_only`);
  if (type === 'bind' && ctx.project && isRelative(source)) {
    return projectBind(ctx, source, target, readOnly, `${where}.source`);
  }
  if (type === 'bind') {
    fail(
      `service '${service}': volumes: type: bind of '${source}' at ${target} is a host bind mount; ${BIND_WAY_OUT}`,
    );
  }
  if (type === 'tmpfs') {
    ctx.warnings.push(
      `service '${service}': dropped the tmpfs mount at ${target} (it lives in the container instead)`,
    );
    return null;
  }
  if (type !== 'volume') {
    fail(`${where}: type: ${type} is refused; only named volumes are supported`);
  }
  const options = asMap(item.get('volume'), `${where}.volume`);
  if (options.has('subpath')) {
    fail(`${where}: volume.subpath is refused; mount the whole volume`);
  }
  return source === ''
    ? anonymous(service, target, readOnly, ctx)
    : named(service, source, target, readOnly, ctx);
}

function named(
  service: string,
  volume: string,
  target: string,
  readOnly: boolean,
  ctx: VolumeContext,
): Mount {
  if (!NAME_RE.test(volume)) {
    fail(`service '${service}': volumes: '${volume}' is not a valid volume name`);
  }
  if (!ctx.declared.has(volume)) {
    fail(
      `service '${service}': volumes: volume '${volume}' is not declared; add it under the top-level ` +
        `volumes: (volumes: {${volume}: {}})`,
    );
  }
  ctx.used.add(volume);
  return { volume, target, readOnly };
}

function anonymous(service: string, target: string, readOnly: boolean, ctx: VolumeContext): Mount {
  if (target === '/') {
    fail(`service '${service}': volumes: a volume cannot be mounted at /`);
  }
  const taken = new Set([...ctx.declared, ...ctx.used]);
  const volume = uniqueName(`${service}_${pathSlug(target)}`, `${service}\0${target}`, taken);
  ctx.used.add(volume);
  return { volume, target, readOnly };
}

const LOSSLESS = /^[A-Za-z0-9][A-Za-z0-9.-]*(?:\/[A-Za-z0-9.-]+)*$/;

/**
 * A stable volume name for a container path: '/work' → 'work', '/srv/data' → 'srv_data'. Paths
 * outside that simple alphabet (or long ones) get a hash suffix, so distinct paths never collide.
 */
export function pathSlug(path: string): string {
  const body = path.slice(1);
  if (LOSSLESS.test(body) && body.length <= 48) {
    return body.replaceAll('/', '_');
  }
  const cleaned = body
    .replace(/[^A-Za-z0-9.-]+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 40);
  return `${cleaned || 'vol'}-${hash8(path)}`;
}

function uniqueName(base: string, key: string, taken: Set<string>): string {
  if (NAME_RE.test(base) && !taken.has(base)) {
    return base;
  }
  const name = `${base.slice(0, 54).replace(/[^A-Za-z0-9]+$/, '')}-${hash8(key)}`;
  if (taken.has(name)) {
    fail(`cannot derive a unique volume name for ${key.replace('\0', ':')}`);
  }
  return name;
}

function hash8(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}
