// Where the CLI's credential and server come from (spec "Command-line client", rule 5):
// the credential is SVC_API_KEY, else the config file's api_key, and the file is read only when
// SVC_API_KEY is unset; the server is SVC_SERVER, then the file's server, then localhost:8080.
// The file is $XDG_CONFIG_HOME/svc/config.json or ~/.config/svc/config.json, mode 0600.
import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { writeFileAtomicSync } from '../shared/atomic-file.ts';
import { CliError } from './errors.ts';

export const DEFAULT_SERVER = 'http://localhost:8080';
export const NOT_SIGNED_IN = 'not signed in: run svc login or set SVC_API_KEY';

export interface ConfigFile {
  server?: string;
  api_key?: string;
  /** The team's name, as the device flow reported it (informational: the key implies the team). */
  team?: string;
}

export interface Config {
  server: string;
  apiKey: string | undefined;
  /** Where the file is (whether or not it exists). */
  path: string;
  /** The file's contents when it was read (never when SVC_API_KEY is set). */
  file: ConfigFile | undefined;
}

type Env = Record<string, string | undefined>;

export function configPath(env: Env = process.env): string {
  const xdg = env.XDG_CONFIG_HOME;
  // An empty or relative XDG_CONFIG_HOME is invalid by the base-directory spec: ignore it.
  const base = xdg?.startsWith('/') ? xdg : join(env.HOME || homedir(), '.config');
  return join(base, 'svc', 'config.json');
}

/** The file's contents, or undefined when it does not exist. */
export function readConfigFile(path: string): ConfigFile | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new CliError(`cannot read ${path}: not JSON (${(err as Error).message}); run svc login again`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new CliError(`cannot read ${path}: expected a JSON object; run svc login again`);
  const out: ConfigFile = {};
  for (const key of ['server', 'api_key', 'team'] as const) {
    const v = (parsed as Record<string, unknown>)[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string') throw new CliError(`cannot read ${path}: '${key}' must be a string`);
    out[key] = v;
  }
  return out;
}

export function resolveConfig(env: Env = process.env): Config {
  const path = configPath(env);
  const envKey = env.SVC_API_KEY || undefined;
  const file = envKey ? undefined : readConfigFile(path);
  const server = env.SVC_SERVER || file?.server || DEFAULT_SERVER;
  return { server: normaliseServer(server), apiKey: envKey ?? (file?.api_key || undefined), path, file };
}

/** `http(s)://host[:port][/prefix]` without a trailing slash; anything else is refused. */
export function normaliseServer(server: string): string {
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new CliError(`invalid server URL '${server}': expected http://host:port or https://host`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError(`invalid server URL '${server}': expected http:// or https://`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** Writes the file with mode 0600 in a 0700 directory; replaces it whole (by rename). */
export function writeConfigFile(path: string, data: ConfigFile): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  // Exactly 0600 (whatever the umask) before it is in place.
  writeFileAtomicSync(path, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600 });
}
