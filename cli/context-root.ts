// Which directory `svc deploy` ships as the project context, and where the compose file sits in it.
// Default: the compose file's directory, widened to the nearest common ancestor that holds every
// relative path the file references (`../caddy/...`, as docker compose users expect), but never
// beyond the enclosing git work tree's root; outside a work tree it is not widened. `--context DIR`
// names the directory instead (never widened past it). A path that still leaves the context is
// refused by the server, by name.
import { existsSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CliError } from './errors.ts';

export interface ContextRoot {
  /** The directory shipped. */
  root: string;
  /** The compose file's path inside it ('/'-separated), '' when the compose file sits at its root. */
  composePath: string;
}

type Node = unknown;
const isMap = (n: Node): n is Record<string, Node> =>
  typeof n === 'object' && n !== null && !Array.isArray(n);
const list = (n: Node): Node[] => (Array.isArray(n) ? n : n === undefined || n === null ? [] : [n]);
const text = (n: Node): string | null => (typeof n === 'string' ? n : null);

/** A relative host path written in the compose file (not a named volume, URL or interpolated value). */
function relativePath(raw: string | null): string | null {
  if (!raw || raw.includes('$') || isAbsolute(raw) || raw.startsWith('~')) return null;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) || raw.startsWith('git@')) return null;
  return raw;
}

/** Every relative path the compose text references: binds, build contexts, env_file, file secrets, tests. */
export function referencedPaths(compose: string): string[] {
  let doc: Node;
  try {
    doc = parseYaml(compose, { merge: true, maxAliasCount: 1000 });
  } catch {
    return []; // the server says what is wrong with the file
  }
  if (!isMap(doc)) return [];
  const out: (string | null)[] = [];
  for (const svc of Object.values(isMap(doc.services) ? doc.services : {})) {
    if (!isMap(svc)) continue;
    for (const v of list(svc.volumes)) {
      const src = isMap(v) ? (v.type === 'bind' ? text(v.source) : null) : (text(v)?.split(':')[0] ?? null);
      if (src?.startsWith('.')) out.push(src);
    }
    const build = svc.build;
    out.push(relativePath(isMap(build) ? (text(build.context) ?? '.') : text(build)));
    for (const e of list(svc.env_file)) out.push(relativePath(isMap(e) ? text(e.path) : text(e)));
  }
  for (const kind of ['secrets', 'configs']) {
    const decls = doc[kind];
    for (const d of Object.values(isMap(decls) ? decls : {}))
      if (isMap(d)) out.push(relativePath(text(d.file)));
  }
  const xsvc = doc['x-svc'];
  const verifier = isMap(xsvc) ? xsvc.verifier : doc['x-svc.verifier'];
  if (isMap(verifier)) out.push(relativePath(text(verifier.tests)));
  return out.filter((p): p is string => p !== null);
}

const within = (dir: string, path: string) =>
  path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);

/** The nearest directory at or above `dir` holding a `.git` entry (a work tree's root), or null. */
function workTreeRoot(dir: string): string | null {
  for (let d = dir; ; d = dirname(d)) {
    if (existsSync(join(d, '.git'))) return d;
    if (dirname(d) === d) return null;
  }
}

function commonAncestor(a: string, b: string): string {
  let d = a;
  while (!within(d, b)) d = dirname(d);
  return d;
}

/** The directory to ship for `composeFile` and where the file sits in it. */
export function contextRoot(composeFile: string, compose: string, named?: string): ContextRoot {
  const file = resolve(composeFile);
  const dir = dirname(file);
  let root = dir;
  if (named !== undefined) {
    root = resolve(named);
    if (!existsSync(root) || !statSync(root).isDirectory())
      throw new CliError(`--context ${named}: not a directory`);
    if (!within(root, file))
      throw new CliError(`--context ${named} does not hold the compose file ${composeFile}`);
  } else {
    const cap = workTreeRoot(dir);
    for (const p of referencedPaths(compose)) {
      const wanted = commonAncestor(root, resolve(dir, p));
      if (cap && within(cap, wanted)) root = wanted;
    }
  }
  const composePath = root === dir ? '' : relative(root, file).split(sep).join('/');
  return { root, composePath };
}
