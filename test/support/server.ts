// Starts the real control plane for a test: a real SQLite file in a temp dir, or a fresh database
// in the throwaway Postgres cluster (SVC_TEST_PG). Listens on a random loopback port.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'node:test';
import { parseConfig } from '../../server/config/config.ts';
import { type Server, type StartOptions, startServer } from '../../server/main.ts';
import { createDatabase } from './postgres.ts';
import { tier } from './tiers.ts';

export type DialectName = 'sqlite' | 'postgres';

export interface TestServer {
  url: string;
  /** The bootstrap team's API key. */
  key: string;
  server: Server;
  dialect: DialectName;
  /** The database it uses (a file path or a DSN): another replica may start on it. */
  db: string;
  /** Request helper: JSON in, `{status, body, headers}` out; `auth` false sends no credential. */
  req(method: string, path: string, opts?: ReqOpts): Promise<Res>;
  close(): Promise<void>;
}

export interface ReqOpts {
  body?: unknown;
  raw?: string | Buffer;
  token?: string | false;
  headers?: Record<string, string>;
}
export interface Res {
  status: number;
  body: any;
  headers: Headers;
}

/** The headers and body of a request: the credential (`key` unless `o.token` says otherwise), JSON or raw. */
export function requestParts(
  key: string,
  o: ReqOpts,
): { headers: Record<string, string>; body?: string | Buffer } {
  const headers: Record<string, string> = { ...o.headers };
  const token = o.token === undefined ? key : o.token;
  if (token) headers.authorization = `Bearer ${token}`;
  let body: string | Buffer | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  return { headers, body };
}

export async function dbTarget(dialect: DialectName): Promise<{ target: string; cleanup: () => void }> {
  if (dialect === 'postgres') {
    const dsn = process.env.SVC_TEST_PG;
    if (!dsn) throw new Error('SVC_TEST_PG is unset');
    const name = `t_${randomBytes(6).toString('hex')}`;
    return { target: await createDatabase(dsn, name), cleanup: () => {} };
  }
  const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  return { target: join(dir, 'svc.db'), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function startTestServer(
  dialect: DialectName = 'sqlite',
  env: Record<string, string> = {},
  opts: StartOptions = {},
  /** An existing database (another replica's): used as it is, left to its first server to clean up. */
  shared?: { target: string; key: string },
): Promise<TestServer> {
  const { target, cleanup } = shared ? { target: shared.target, cleanup: () => {} } : await dbTarget(dialect);
  const key = shared?.key ?? `dak_test${randomBytes(16).toString('hex')}`;
  try {
    return await startOn(dialect, target, key, env, opts, cleanup);
  } catch (err) {
    cleanup();
    throw err;
  }
}

/**
 * Another control-plane replica on `t`'s database (the same team key works on both). Closing it
 * leaves the database to `t`.
 */
export function startReplica(
  t: TestServer,
  env: Record<string, string> = {},
  opts: StartOptions = {},
): Promise<TestServer> {
  const sealing: Record<string, string> = t.server.ctx.config.secretsKey
    ? { SVC_SECRETS_KEY: t.server.ctx.config.secretsKey }
    : {};
  return startOn(t.dialect, t.db, t.key, { ...sealing, ...env }, opts, () => {});
}

async function startOn(
  dialect: DialectName,
  target: string,
  key: string,
  env: Record<string, string>,
  opts: StartOptions,
  cleanup: () => void,
): Promise<TestServer> {
  const config = parseConfig(['-addr', '127.0.0.1:0', '-db', target], {
    SVC_BOOTSTRAP_KEY: key,
    // A Postgres control plane seals provider tokens only with SVC_SECRETS_KEY (no key file).
    ...(dialect === 'postgres' ? { SVC_SECRETS_KEY: randomBytes(32).toString('base64') } : {}),
    ...env,
  });
  const server = await startServer(config, { logger: false, ...opts });
  // The public URL follows the real port so join commands and stream URLs are usable.
  server.ctx.config.publicUrl = env.SVC_PUBLIC_URL ?? server.url;
  const req = async (method: string, path: string, o: ReqOpts = {}): Promise<Res> => {
    const { headers, body } = requestParts(key, o);
    const r = await fetch(server.url + path, { method, headers, body });
    const text = await r.text();
    let parsed: unknown = text;
    if ((r.headers.get('content-type') ?? '').includes('json') && text) parsed = JSON.parse(text);
    return { status: r.status, body: parsed, headers: r.headers };
  };
  return {
    url: server.url,
    key,
    server,
    dialect,
    db: target,
    req,
    close: async () => {
      await server.close();
      cleanup();
    },
  };
}

/**
 * `n` control-plane replicas on one Postgres database (one secrets key, one bootstrap key), each
 * listening on its own port; the first one's close does not drop the database.
 */
export async function startReplicas(
  n: number,
  env: Record<string, string> = {},
  opts: StartOptions = {},
): Promise<TestServer[]> {
  const { target } = await dbTarget('postgres');
  const key = `dak_test${randomBytes(16).toString('hex')}`;
  const shared = { SVC_SECRETS_KEY: randomBytes(32).toString('base64'), ...env };
  const out: TestServer[] = [];
  for (let i = 0; i < n; i++) out.push(await startTestServer('postgres', shared, opts, { target, key }));
  return out;
}

/** Runs the same suite against SQLite and Postgres (the latter in the postgres tier). */
export function forEachDialect(name: string, fn: (dialect: DialectName) => void): void {
  for (const dialect of ['sqlite', 'postgres'] as const) {
    describe(`${name} [${dialect}]`, { skip: dialect === 'postgres' ? tier('postgres') : false }, () =>
      fn(dialect),
    );
  }
}
