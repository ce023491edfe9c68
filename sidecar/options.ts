// The sidecar's verbs and flags (spec "Sidecar program"), each flag falling back to its SVC_*
// variable. `--env-file` is read first so its KEY=VALUE lines count as the environment.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

export const VERBS = ['join', 'run', 'install', 'version'] as const;
export type Verb = (typeof VERBS)[number];

export interface SidecarOptions {
  verb: Verb;
  server: string;
  token: string;
  statePath: string;
  dataDir: string;
  zfsPool: string;
  /** Which of server/data/zfs-pool came from a flag (a flag beats saved state). */
  explicit: { server: boolean; data: boolean; zfsPool: boolean };
}

export class OptionsError extends Error {}

export const USAGE = `usage:
  svcd join --server URL[,URL...] --token T [--state FILE] [--data DIR] [--zfs-pool POOL] [--env-file FILE]
  svcd run [--server URL[,URL...]] [--state FILE] [--data DIR] [--zfs-pool POOL] [--env-file FILE]
  svcd install --server URL --token T [--data DIR] [--zfs-pool POOL] [--env-file FILE]
  svcd version`;

const isRoot = () => process.getuid?.() === 0;
export const defaultStatePath = () =>
  isRoot() ? '/etc/svc/host.json' : join(homedir(), '.svc', 'host.json');
export const defaultDataDir = () => (isRoot() ? '/var/lib/svc' : join(homedir(), '.svc', 'data'));

/** KEY=VALUE lines; blank lines and # comments skipped; surrounding quotes removed. */
export function parseEnvFile(text: string, file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!m) throw new OptionsError(`${file}:${i + 1}: expected KEY=VALUE`);
    out[m[1]] = m[2].replace(/^(['"])(.*)\1$/, '$2');
  }
  return out;
}

/** How many control-plane URLs one --server may list (replicas, each tried in turn). */
export const MAX_SERVERS = 16;

/** One URL, or several separated by commas (replicas without a load balancer): each checked. */
function checkServer(list: string): string {
  const urls = list.split(',').map((u) => u.trim());
  if (urls.length > MAX_SERVERS) throw new OptionsError(`--server: at most ${MAX_SERVERS} URLs`);
  return urls
    .map((url) => {
      let u: URL;
      try {
        u = new URL(url);
      } catch {
        throw new OptionsError(`--server: '${url.slice(0, 200)}' is not a URL`);
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new OptionsError('--server must be http:// or https://');
      return url.replace(/\/+$/, '');
    })
    .join(',');
}

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv = process.env): SidecarOptions {
  const [verb, ...rest] = argv;
  if (!verb || verb === '--help' || verb === '-h' || verb === 'help') throw new OptionsError(USAGE);
  if (!(VERBS as readonly string[]).includes(verb))
    throw new OptionsError(`unknown verb '${verb}'\n${USAGE}`);
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        server: { type: 'string' },
        token: { type: 'string' },
        state: { type: 'string' },
        data: { type: 'string' },
        'zfs-pool': { type: 'string' },
        'env-file': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }) as { values: Record<string, string | undefined> });
  } catch (err) {
    throw new OptionsError(`${(err as Error).message}\n${USAGE}`);
  }
  const fileEnv = values['env-file']
    ? parseEnvFile(readFileSync(values['env-file'], 'utf8'), values['env-file'])
    : {};
  const e = { ...env, ...fileEnv };
  for (const [k, v] of Object.entries(fileEnv)) process.env[k] = v;
  const server = values.server ?? e.SVC_SERVER ?? '';
  const opts: SidecarOptions = {
    verb: verb as Verb,
    server: server ? checkServer(server) : '',
    token: values.token ?? e.SVC_JOIN_TOKEN ?? '',
    statePath: values.state ?? defaultStatePath(),
    dataDir: values.data ?? e.SVC_DATA_DIR ?? '',
    zfsPool: values['zfs-pool'] ?? e.SVC_ZFS_POOL ?? '',
    explicit: {
      server: values.server !== undefined,
      data: values.data !== undefined,
      zfsPool: values['zfs-pool'] !== undefined,
    },
  };
  if ((opts.verb === 'join' || opts.verb === 'install') && !opts.server)
    throw new OptionsError(`${verb} needs --server (or SVC_SERVER)`);
  if (opts.verb === 'install' && !opts.token)
    throw new OptionsError('install needs --token (or SVC_JOIN_TOKEN)');
  return opts;
}
