// Authentication (spec "Authentication"): every route declares `config.auth` as `none`, `key`
// (an API key or a session) or `user` (a session only); a route that declares nothing needs `key`.
// 401 for a bad credential, 403 for a session without (that) team; other teams' objects are 404
// at the repositories, which always filter by the caller's team.
import type { FastifyRequest } from 'fastify';
import { PREFIX } from '../../protocol/ids.ts';
import type { Db } from '../db/types.ts';
import { Forbidden, Unauthorized } from '../errors.ts';
import type { App } from '../http/app.ts';
import { hashSecret, sameHash } from './secrets.ts';
import { findKeyByHash, findSession, membershipsOf, touchKey } from './store.ts';

export type AuthMode = 'none' | 'key' | 'user';

export interface Caller {
  teamId: string;
  /** `key` for API keys; the membership role (`owner`, ...) for sessions. */
  role: string;
  keyId?: string;
  userId?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
  }
  interface FastifyRequest {
    caller: Caller;
  }
}

/** LastUsedAt is written at most this often per key, so reads stay reads under load. */
const TOUCH_EVERY_MS = 60_000;

/**
 * A valid API key is remembered this long (issue 15: one lookup per key, not per request, on the
 * exec hot path). Revoking through this process forgets it at once; elsewhere (another control
 * plane on the same Postgres, the device flow) it stops working within this bound.
 * `SVC_AUTH_CACHE_MS=0` turns it off.
 */
export const KEY_CACHE_MS = Number(process.env.SVC_AUTH_CACHE_MS ?? 2000);
const KEY_CACHE_MAX = 10_000;

export class Authenticator {
  #db: Db;
  #touched = new Map<string, number>();
  #keys = new Map<string, { caller: Caller; until: number }>();

  constructor(db: Db) {
    this.#db = db;
  }

  /** Forgets a revoked key at once. */
  forgetKey(keyId: string): void {
    for (const [hash, e] of this.#keys) if (e.caller.keyId === keyId) this.#keys.delete(hash);
  }

  async authenticate(
    authorization: string | undefined,
    teamHeader: string | undefined,
    mode: AuthMode,
  ): Promise<Caller> {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!m) throw new Unauthorized('missing bearer credential');
    const token = m[1];
    if (token.startsWith(PREFIX.apiKey)) return this.#fromKey(token, mode);
    if (token.startsWith(PREFIX.session)) return this.#fromSession(token, teamHeader);
    throw new Unauthorized('unknown credential type');
  }

  /** A bad or revoked key is 401 on every route; only a valid one on a `user` route is 403. */
  async #fromKey(token: string, mode: AuthMode): Promise<Caller> {
    const caller = await this.#keyCaller(token);
    if (mode === 'user') throw new Forbidden('this route needs a user session; API keys are refused');
    return caller;
  }

  /** The caller a valid key stands for (cached briefly); 401 for a bad or revoked one. */
  async #keyCaller(token: string): Promise<Caller> {
    const hash = hashSecret(token);
    const nowMs = Date.now();
    const cached = this.#keys.get(hash);
    if (cached && cached.until > nowMs) return { ...cached.caller };
    const row = await findKeyByHash(this.#db, hash);
    if (!row || !sameHash(hash, row.key_hash)) throw new Unauthorized('invalid API key');
    if (row.revoked_at) throw new Unauthorized('API key revoked');
    if (nowMs - (this.#touched.get(row.id) ?? 0) >= TOUCH_EVERY_MS) {
      this.#touched.set(row.id, nowMs);
      await touchKey(this.#db, row.id, new Date(nowMs).toISOString());
    }
    const caller: Caller = { teamId: row.team_id, role: 'key', keyId: row.id };
    if (KEY_CACHE_MS > 0) {
      if (this.#keys.size >= KEY_CACHE_MAX) this.#keys.clear();
      this.#keys.set(hash, { caller, until: nowMs + KEY_CACHE_MS });
    }
    return { ...caller };
  }

  async #fromSession(token: string, teamHeader: string | undefined): Promise<Caller> {
    const hash = hashSecret(token);
    const s = await findSession(this.#db, hash);
    if (!s || !sameHash(hash, s.token_hash)) throw new Unauthorized('invalid session');
    if (Date.parse(s.expires_at) <= Date.now()) throw new Unauthorized('session expired');
    const teams = await membershipsOf(this.#db, s.user_id);
    const team = teamHeader ? teams.find((t) => t.ID === teamHeader) : teams[0];
    if (!team) throw new Forbidden(teamHeader ? 'not a member of that team' : 'session has no team');
    return { teamId: team.ID, role: team.Role, userId: s.user_id };
  }
}

export function installAuth(app: App, auth: Authenticator): void {
  app.decorateRequest('caller', undefined as unknown as Caller);
  app.addHook('onRequest', async (req: FastifyRequest) => {
    // Unmatched routes reach the not-found handler with no config; they need no credential.
    if (!req.routeOptions.url) return;
    const mode = req.routeOptions.config.auth ?? 'key';
    if (mode === 'none' || req.method === 'OPTIONS') return;
    const team = req.headers['x-svc-team'];
    req.caller = await auth.authenticate(
      req.headers.authorization,
      typeof team === 'string' ? team : undefined,
      mode,
    );
  });
}
