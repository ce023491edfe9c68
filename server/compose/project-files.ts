// What a service takes from its project context: `env_file:` (read at parse time) and file-backed
// `secrets:` / `configs:` (mounted read-only from the environment's copy of the context).
import type { BindMount } from '../../protocol/spec.ts';
import { contextKind, type ProjectContext, readContextFile, resolveContextPath, shown } from './context.ts';
import { parseEnvFile } from './env-file.ts';
import { asBool, asMap, containerPath, fail, isMap, type Node, scalarText } from './tree.ts';

/** The variables of a service's `env_file:` entries, later files winning. */
export function parseEnvFiles(service: string, node: Node, project: ProjectContext): Record<string, string> {
  const where = `service '${service}': env_file`;
  const items = Array.isArray(node) ? node : [node];
  const out: Record<string, string> = {};
  items.forEach((item, i) => {
    const at = `${where}[${i}]`;
    const map = isMap(item) ? item : null;
    const raw = scalarText(map ? map.get('path') : item, map ? `${at}.path` : at);
    const required = map?.has('required') ? asBool(map.get('required'), `${at}.required`) : true;
    const text = readContextFile(project, raw, at);
    if (text === null) {
      if (required) fail(`${where}: '${raw}' does not exist in the project directory`);
      return;
    }
    Object.assign(out, parseEnvFile(text, `${where} '${raw}'`));
  });
  return out;
}

/** Top-level secrets/configs backed by a file of the project: name → normalised context path. */
export function fileBackings(
  node: Node | undefined,
  kind: 'secrets' | 'configs',
  project: ProjectContext,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, decl] of asMap(node, kind)) {
    const map = asMap(decl, `${kind}.${name}`);
    if (!map.has('file')) continue;
    const raw = scalarText(map.get('file'), `${kind}.${name}.file`);
    const path = resolveContextPath(project, raw, `${kind}.${name}.file`);
    if (contextKind(project, path) !== 'file') {
      fail(`${kind}.${name}: the file '${raw}' does not exist in the project directory`);
    }
    out.set(name, path);
  }
  return out;
}

/** A service's `secrets:` / `configs:` as read-only mounts of the context files behind them. */
export function parseFileMounts(
  service: string,
  kind: 'secrets' | 'configs',
  node: Node,
  files: Map<string, string>,
  warnings: string[],
): BindMount[] {
  const where = `service '${service}': ${kind}`;
  const items = Array.isArray(node) ? node : fail(`${where} must be a list`);
  return items.map((item, i) => {
    const map = isMap(item) ? item : null;
    const name = scalarText(map ? map.get('source') : item, `${where}[${i}]`);
    const source = files.get(name);
    if (source === undefined) {
      fail(
        `${where}: '${name}' is not backed by a file of the project; only file: secrets and configs are mounted ` +
          `(pass other values through environment:)`,
      );
    }
    const rawTarget = map?.has('target') ? scalarText(map.get('target'), `${where}[${i}].target`) : name;
    const base = kind === 'secrets' ? '/run/secrets/' : '/';
    const target = containerPath(rawTarget.startsWith('/') ? rawTarget : `${base}${rawTarget}`, where);
    if (map && ['uid', 'gid', 'mode'].some((k) => map.has(k))) {
      warnings.push(`${where}: dropped uid, gid and mode of '${name}' (mounted read-only as in the project)`);
    }
    return { source, target, read_only: true };
  });
}

/** A relative bind (`./x:/y[:ro]`) as a mount of the context path. */
export function contextBind(
  project: ProjectContext,
  raw: string,
  target: string,
  readOnly: boolean,
  where: string,
  warnings: string[],
): BindMount {
  const source = resolveContextPath(project, raw, where);
  if (contextKind(project, source) === null) {
    warnings.push(`${where}: '${shown(source)}' is not in the project; an empty directory is mounted`);
  }
  return { source, target, read_only: readOnly };
}
