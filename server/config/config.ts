// Control plane configuration (spec: "Control plane configuration"), parsed once into a typed
// object. Flags accept Go-style `-addr` as well as `--addr`; each falls back to its SVC_* variable.
import { parseArgs } from 'node:util';
import { FS_LIMITS } from '../../protocol/fs.ts';
import { parseSecretsKey } from '../clouds/secret-box.ts';

export interface Config {
  host: string;
  port: number;
  /** Embedded-file path or postgres:// DSN. */
  db: string;
  /** `db` with any password replaced, for logs. */
  dbRedacted: string;
  publicUrl: string;
  sidecarUrl: string;
  verbose: boolean;
  /** `--dev`: also join this machine as a host through a local sidecar when Docker is reachable. */
  dev: boolean;
  team: string;
  bootstrapKey: string;
  consoleUrl: string;
  devLogin: boolean;
  codehost: {
    clientId: string;
    clientSecret: string;
    appId: string;
    appPrivateKey: string;
    webhookSecret: string;
    apiUrl: string;
  };
  releasesDir: string;
  /** SVC_SECRETS_KEY: 32 bytes (base64 or hex) sealing provider tokens; '' = key file beside the DB. */
  secretsKey: string;
  /** Where project contexts (PUT /v1/uploads) are kept: SVC_UPLOADS_DIR, else next to an embedded db. */
  uploadsDir: string;
  /** SVC_UPLOADS_GRACE (seconds, default 1 day): how long an upload nothing live uses is kept. */
  uploadsGraceMs: number;
  /** SVC_UPLOADS_SWEEP_EVERY (seconds, default 3600, 0 = off): how often uploads are collected. */
  uploadsSweepMs: number;
  /**
   * SVC_REPLICA_URL: where hosts reach this replica itself, not the load balancer ('' = the public
   * URL, right for one replica). One-time transfer URLs (blobs) point here: their bytes are held by
   * the replica that handed them out.
   */
  replicaUrl: string;
  /**
   * SVC_REPLICA_PEER_URL: where the other replicas reach this one, when that differs from where
   * hosts do (e.g. a compose network's service name); '' = SVC_REPLICA_URL. A host's request for a
   * blob that reaches another replica is relayed here.
   */
  replicaPeerUrl: string;
  /**
   * SVC_DB_POOL (default 10, 1 to 500): the most connections a process holds to Postgres at once.
   * A replica taking over thousands of hosts at once queues their hellos' statements in it.
   */
  dbPoolSize: number;
  /**
   * SVC_REPLICA_LEASE (seconds, default 10): how long a replica's row, and so its hold on hosts,
   * lasts unrenewed (its heartbeat renews it every fifth of it); past it the others take over.
   */
  replicaLeaseMs: number;
  /**
   * SVC_DRAIN_SECONDS (default 0): after SIGTERM, how long /ready answers 503 while every request
   * is still served, so a load balancer takes the replica out before it stops listening.
   */
  drainMs: number;
  /** What one upload may be and what a team may keep (SVC_UPLOADS_QUOTA, ..._QUOTA_COUNT, ..._CHECK_TIMEOUT). */
  uploads: UploadLimits;
  /**
   * SVC_DEPLOY_LEASE (seconds, default 30): how long a replica's hold on its deployments lasts
   * unrenewed (renewed every third of it); past it another replica adopts them.
   */
  deployLeaseMs: number;
  /** SVC_METRICS_TOKEN: the operator's bearer token for GET /metrics; '' = /metrics is off (404). */
  metricsToken: string;
  /** SVC_FS_MAX_FILE_BYTES: the largest file the file API reads or writes (default 1 GiB; 413 past it). */
  fsMaxFileBytes: number;
  /** SVC_GVISOR_TEAMS: teams (ids or names, comma-separated) whose environments must run under gVisor. */
  gvisorTeams: string[];
  /** SVC_E2B_ADDR / -e2b-addr: where the E2B-compatible API and envd listen; null = off (--dev: 127.0.0.1:3049). */
  e2b: { host: string; port: number } | null;
  /** SVC_E2B_DEFAULT_TEMPLATE: what E2B's default template `base` stands for (an image, `ver_…` or `<project>/<env>`). */
  e2bDefaultTemplate: string;
}

export interface UploadLimits {
  /** Bytes of one upload as sent (413 past it). */
  maxBytes: number;
  /** Bytes read out of the archive when it is checked: entries, headers, padding and zero blocks. */
  maxUnpackedBytes: number;
  maxEntries: number;
  /** How long checking one archive may take (413 past it). */
  checkMs: number;
  /** Bytes of uploads a team keeps (each content once); 0 = no quota. */
  quotaBytes: number;
  /** Uploads a team keeps; 0 = no quota. */
  quotaCount: number;
}

const MiB = 1024 * 1024;

export const DEFAULT_UPLOAD_LIMITS: UploadLimits = {
  maxBytes: 512 * MiB,
  maxUnpackedBytes: 2048 * MiB,
  maxEntries: 100_000,
  checkMs: 120_000,
  quotaBytes: 4096 * MiB,
  quotaCount: 1000,
};

export class ConfigError extends Error {}

const FLAGS = ['addr', 'e2b-addr', 'db', 'public-url', 'sidecar-url', 'v', 'dev', 'help'] as const;

/** `-addr x` / `-addr=x` → `--addr x`: Go's flag style is what the spec prints. */
function normaliseArgs(argv: string[]): string[] {
  return argv.map((a) => {
    const m = /^-([a-z][a-z0-9-]*)(=.*)?$/.exec(a);
    if (m && (FLAGS as readonly string[]).includes(m[1])) return `--${m[1]}${m[2] ?? ''}`;
    return a;
  });
}

export function parseAddr(addr: string, flag = '-addr'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(addr);
  if (!m) throw new ConfigError(`${flag}: '${addr}' is not host:port or :port`);
  const port = Number(m[3]);
  if (port > 65535) throw new ConfigError(`${flag}: port ${port} is out of range`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/**
 * The URL at which this machine reaches a server listening on `host:port`: a wildcard address is
 * reached on loopback, an IPv6 address is bracketed.
 */
export function localUrl(host: string, port: number): string {
  if (host === '0.0.0.0' || host === '::') return `http://127.0.0.1:${port}`;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** `--dev` listens on loopback unless -addr (or SVC_ADDR) says otherwise. */
const DEV_ADDR = '127.0.0.1:8080';
/** `--dev` serves the E2B-compatible surface here unless -e2b-addr (or SVC_E2B_ADDR) says otherwise. */
const DEV_E2B_ADDR = '127.0.0.1:3049';
/** E2B's `base` template: a Debian image with bash, as E2B's own base is. */
const DEFAULT_E2B_TEMPLATE = 'debian:bookworm-slim';

function httpUrl(name: string, value: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(`${name}: '${value}' is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ConfigError(`${name}: must be http:// or https://`);
  return value.replace(/\/+$/, '');
}

/**
 * The DSN with its password (in the user part, or a `password` query parameter) replaced by ***.
 * Parsed as a URL, as the Postgres client parses it, so a raw `@` in a password cannot leak a tail.
 */
export function redactDsn(target: string): string {
  if (!/^postgres(ql)?:\/\//i.test(target)) return target;
  let u: URL;
  try {
    u = new URL(target);
  } catch {
    return 'postgres://(unparseable DSN, not shown)';
  }
  if (u.password) u.password = '***';
  for (const key of [...u.searchParams.keys()]) if (/pass/i.test(key)) u.searchParams.set(key, '***');
  return u.toString();
}

function assembleDsn(env: NodeJS.ProcessEnv): string {
  const host = env.SVC_DB_HOST as string;
  const port = env.SVC_DB_PORT || '5432';
  if (!/^\d{1,5}$/.test(port)) throw new ConfigError(`SVC_DB_PORT: '${port}' is not a port`);
  const user = encodeURIComponent(env.SVC_DB_USER || 'svc');
  const pass = env.SVC_DB_PASSWORD ? `:${encodeURIComponent(env.SVC_DB_PASSWORD)}` : '';
  const name = encodeURIComponent(env.SVC_DB_NAME || 'svc');
  const sslmode = encodeURIComponent(env.SVC_DB_SSLMODE || 'require');
  const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `postgres://${user}${pass}@${h}:${port}/${name}?sslmode=${sslmode}`;
}

function checkSecretsKey(value: string): string {
  if (!value) return '';
  try {
    parseSecretsKey(value, 'SVC_SECRETS_KEY');
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return value;
}

/** A whole number of seconds from the environment, or the default when unset. */
function seconds(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  return count(env, name, fallback, 'seconds');
}

/** A whole number from the environment (at most 9 digits), or the default when unset. */
function count(env: NodeJS.ProcessEnv, name: string, fallback: number, unit: string): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,9}$/.test(raw))
    throw new ConfigError(`${name}: '${raw.slice(0, 40)}' is not a whole number of ${unit}`);
  return Number(raw);
}

function deployLease(env: NodeJS.ProcessEnv): number {
  const sec = seconds(env, 'SVC_DEPLOY_LEASE', 30);
  if (sec < 1)
    throw new ConfigError('SVC_DEPLOY_LEASE: a lease of 0 seconds would lapse before it is renewed');
  return sec * 1000;
}

function dbPool(env: NodeJS.ProcessEnv): number {
  const n = count(env, 'SVC_DB_POOL', 10, 'connections');
  if (n < 1 || n > 500) throw new ConfigError('SVC_DB_POOL: must be from 1 to 500 connections');
  return n;
}

function replicaLease(env: NodeJS.ProcessEnv): number {
  const sec = seconds(env, 'SVC_REPLICA_LEASE', 10);
  // Under 2 s a heartbeat (a fifth of it) would race the database's own round trips.
  if (sec < 2) throw new ConfigError('SVC_REPLICA_LEASE: must be at least 2 seconds');
  return sec * 1000;
}

function uploadLimits(env: NodeJS.ProcessEnv): UploadLimits {
  const d = DEFAULT_UPLOAD_LIMITS;
  const checkSec = seconds(env, 'SVC_UPLOADS_CHECK_TIMEOUT', d.checkMs / 1000);
  if (checkSec === 0) throw new ConfigError('SVC_UPLOADS_CHECK_TIMEOUT: must be at least 1 second');
  return {
    ...d,
    quotaBytes: count(env, 'SVC_UPLOADS_QUOTA', d.quotaBytes / MiB, 'MiB') * MiB,
    quotaCount: count(env, 'SVC_UPLOADS_QUOTA_COUNT', d.quotaCount, 'uploads'),
    checkMs: checkSec * 1000,
  };
}

function fsMaxFileBytes(env: NodeJS.ProcessEnv): number {
  const raw = env.SVC_FS_MAX_FILE_BYTES;
  if (raw === undefined || raw === '') return FS_LIMITS.maxFileBytes;
  if (!/^[1-9]\d{0,12}$/.test(raw))
    throw new ConfigError(
      `SVC_FS_MAX_FILE_BYTES: '${raw.slice(0, 40)}' is not a positive whole number of bytes`,
    );
  return Number(raw);
}

/**
 * An operator's bearer token: 16 printable characters at least (over 100 bits when random), so
 * guessing is hopeless at the anonymous per-address rate limit that GET /metrics answers under (a
 * wrong token is a 403, which the failed-authentication limit does not count).
 */
function metricsToken(value: string): string {
  if (value === '') return '';
  if (!/^[\x21-\x7e]{16,512}$/.test(value))
    throw new ConfigError('SVC_METRICS_TOKEN: must be 16 to 512 printable characters without spaces');
  return value;
}

/** `<db>.uploads` for an embedded database file; under the home directory for Postgres or memory. */
function defaultUploadsDir(db: string, env: NodeJS.ProcessEnv): string {
  if (!/^postgres(ql)?:\/\//i.test(db) && db !== ':memory:' && !db.startsWith('file::memory:'))
    return `${db}.uploads`;
  return `${env.HOME || '/tmp'}/.svc/uploads`;
}

export const USAGE = `usage: svc-server [-addr :8080 (--dev: 127.0.0.1:8080)] [-e2b-addr host:port (--dev: 127.0.0.1:3049)] [-db svc.db|postgres://...] [-public-url URL] [-sidecar-url URL] [-v] [--dev]`;

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): Config {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: normaliseArgs(argv),
      options: {
        addr: { type: 'string' },
        'e2b-addr': { type: 'string' },
        db: { type: 'string' },
        'public-url': { type: 'string' },
        'sidecar-url': { type: 'string' },
        v: { type: 'boolean' },
        dev: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n${USAGE}`);
  }
  if (values.help) throw new ConfigError(USAGE);
  const dev = Boolean(values.dev);
  const { host, port } = parseAddr((values.addr as string) ?? env.SVC_ADDR ?? (dev ? DEV_ADDR : ':8080'));
  const e2bAddr = (values['e2b-addr'] as string) ?? env.SVC_E2B_ADDR ?? (dev ? DEV_E2B_ADDR : '');
  const e2b = e2bAddr ? parseAddr(e2bAddr, '-e2b-addr') : null;
  const db = (values.db as string) ?? env.SVC_DB ?? (env.SVC_DB_HOST ? assembleDsn(env) : 'svc.db');
  if (db === '') throw new ConfigError('-db: empty');
  // The spec's default outside --dev; a development server (which the spec does not describe) is
  // reached where it listens, so its own sidecar can fetch project contexts from it.
  const publicUrl = httpUrl(
    '-public-url',
    (values['public-url'] as string) ??
      env.SVC_PUBLIC_URL ??
      (dev ? localUrl(host, port) : 'http://localhost:8080'),
  );
  const sidecarUrl = httpUrl(
    '-sidecar-url',
    (values['sidecar-url'] as string) ?? env.SVC_SIDECAR_URL ?? `${publicUrl}/svcd`,
  );
  const consoleUrl = env.SVC_CONSOLE_URL ? httpUrl('SVC_CONSOLE_URL', env.SVC_CONSOLE_URL) : '';
  const bootstrapKey = env.SVC_BOOTSTRAP_KEY ?? '';
  if (bootstrapKey && !/^dak_[A-Za-z0-9_-]{16,}$/.test(bootstrapKey)) {
    throw new ConfigError(
      'SVC_BOOTSTRAP_KEY: must be dak_ followed by at least 16 characters of [A-Za-z0-9_-]',
    );
  }
  if (env.SVC_DEV_LOGIN && env.SVC_DEV_LOGIN !== '1' && env.SVC_DEV_LOGIN !== '0') {
    throw new ConfigError(`SVC_DEV_LOGIN: '${env.SVC_DEV_LOGIN}' must be 1 or 0`);
  }
  return {
    host,
    port,
    db,
    dbRedacted: redactDsn(db),
    publicUrl,
    sidecarUrl,
    verbose: Boolean(values.v),
    dev,
    team: env.SVC_TEAM || 'default',
    bootstrapKey,
    consoleUrl,
    devLogin: env.SVC_DEV_LOGIN === '1',
    codehost: {
      clientId: env.SVC_CODEHOST_CLIENT_ID ?? '',
      clientSecret: env.SVC_CODEHOST_CLIENT_SECRET ?? '',
      appId: env.SVC_CODEHOST_APP_ID ?? '',
      appPrivateKey: env.SVC_CODEHOST_APP_PRIVATE_KEY ?? '',
      webhookSecret: env.SVC_CODEHOST_WEBHOOK_SECRET ?? '',
      apiUrl: env.SVC_CODEHOST_API_URL
        ? httpUrl('SVC_CODEHOST_API_URL', env.SVC_CODEHOST_API_URL)
        : 'https://api.github.com',
    },
    releasesDir: env.SVC_RELEASES_DIR || 'bin',
    secretsKey: checkSecretsKey(env.SVC_SECRETS_KEY ?? ''),
    uploadsDir: env.SVC_UPLOADS_DIR || defaultUploadsDir(db, env),
    uploadsGraceMs: seconds(env, 'SVC_UPLOADS_GRACE', 86_400) * 1000,
    uploadsSweepMs: seconds(env, 'SVC_UPLOADS_SWEEP_EVERY', 3600) * 1000,
    drainMs: seconds(env, 'SVC_DRAIN_SECONDS', 0) * 1000,
    replicaUrl: env.SVC_REPLICA_URL ? httpUrl('SVC_REPLICA_URL', env.SVC_REPLICA_URL) : '',
    replicaPeerUrl: env.SVC_REPLICA_PEER_URL ? httpUrl('SVC_REPLICA_PEER_URL', env.SVC_REPLICA_PEER_URL) : '',
    replicaLeaseMs: replicaLease(env),
    dbPoolSize: dbPool(env),
    uploads: uploadLimits(env),
    deployLeaseMs: deployLease(env),
    metricsToken: metricsToken(env.SVC_METRICS_TOKEN ?? ''),
    fsMaxFileBytes: fsMaxFileBytes(env),
    gvisorTeams: (env.SVC_GVISOR_TEAMS ?? '')
      .split(',')
      .map((t) => t.trim())
      .filter(Boolean),
    e2b,
    e2bDefaultTemplate: env.SVC_E2B_DEFAULT_TEMPLATE || DEFAULT_E2B_TEMPLATE,
  };
}

/** Whether a listen host only takes connections from this machine. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * SVC_DEV_LOGIN signs anyone who can reach the server in as any existing user: said
 * loudly at start unless the server listens on loopback only.
 */
export function devLoginWarning(config: Pick<Config, 'devLogin' | 'host'>): string | null {
  if (!config.devLogin || isLoopbackHost(config.host)) return null;
  return `WARNING: SVC_DEV_LOGIN=1 lets anyone who reaches ${config.host} sign in as any existing user without a password; listen on 127.0.0.1 (-addr 127.0.0.1:<port>) or unset SVC_DEV_LOGIN`;
}
