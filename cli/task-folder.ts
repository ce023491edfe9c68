// Reading a task folder (Harbor's task.toml and its files), shared by the Harbor conversion
// (harbor.ts), its [[steps]] (harbor-steps.ts) and the Terminal-Bench staging (terminal-bench.ts):
// none of those imports another for these, so the task-folder modules form no import cycle.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { CliError } from './errors.ts';

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export function read(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    throw new CliError(`not a Harbor task: ${what} is missing (${path})`);
  }
}

export function readTaskToml(dir: string): Obj {
  try {
    return parseToml(read(join(dir, 'task.toml'), 'task.toml')) as Obj;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`task.toml is not valid TOML: ${(err as Error).message.split('\n')[0]}`);
  }
}

/** `${VAR}` and `${VAR:-default}` from this shell, as Harbor resolves [environment].env. */
export function resolveHostVars(text: string): string {
  return text.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]{0,255})(?::-([^}]{0,1000}))?\}/g,
    (_m, name: string, def?: string) => process.env[name] ?? def ?? '',
  );
}

/** Compose reads `$` as interpolation: values that are final are written with `$$`. */
export const lit = (s: string) => s.replaceAll('$', '$$');

/** The last WORKDIR of the Dockerfile (where Harbor tasks keep the agent's work), or /app. */
export function workdirOf(dockerfile: string): string {
  let dir = '/app';
  for (const line of dockerfile.split('\n')) {
    const m = /^\s*WORKDIR\s+(\/\S*)\s*$/i.exec(line);
    if (m) dir = m[1];
  }
  return dir;
}

export const seconds = (v: unknown, fallback: number) =>
  Math.max(1, Math.ceil(Number(v ?? fallback)) || fallback);

/** Harbor resolves `${VAR}` in [verifier].env from the host; compose must not read `$` again. */
export const hostEnv = (vars: Obj) =>
  Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, lit(resolveHostVars(String(v)))]));
