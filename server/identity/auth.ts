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
 * A valid API key is remembered this long (one lookup per key, not per request, on the
 * exec hot path). Revoking forgets it at once in this process and, told by a notification, in
 * the other replicas on the same Postgres (which forget every key when their notifications may
 * have been lost); a notification lost anyway still ends within this bound.
 * `SVC_AUTH_CACHE_MS=0` turns it off. The cache is keyed by the bearer string itself, so a hit
 * costs no sha256 (~5 µs of a ~240 µs exec); it lives only in this process's memory, which holds
 * the same string in the request's headers anyway, and never reaches the database or a log.
 */
export const KEY_CACHE_MS = Number(process.env.SVC_AUTH_CACHE_MS ?? 2000);
const KEY_CACHE_MAX = 10_000;
const BEARER = /^Bearer\s+(\S+)\s*$/i;

export class Authenticator {
  #db: Db;
  #touched = new Map<string, number>();
  /** Valid keys by bearer string (never persisted), until their entry expires. */
  #keys = new Map<string, { caller: Caller; until: number }>();

  constructor(db: Db) {
    this.#db = db;
  }

  /** Forgets a revoked key at once. */
  forgetKey(keyId: string): void {
    for (const [token, e] of this.#keys) if (e.caller.keyId === keyId) this.#keys.delete(token);
  }

  /** Forgets every remembered key (a revocation elsewhere may have been missed). */
  forgetAll(): void {
    this.#keys.clear();
  }

  /**
   * The caller of a key remembered from an earlier request, without a promise or a hash: the hot
   * path's answer. Undefined whenever `authenticate` must decide (not a key, not remembered, or a
   * `user` route, which refuses keys).
   */
  cached(authorization: string | undefined, mode: AuthMode): Caller | undefined {
    if (mode === 'user' || KEY_CACHE_MS <= 0 || !authorization) return undefined;
    const m = BEARER.exec(authorization);
    const e = m ? this.#keys.get(m[1]) : undefined;
    if (!e) return undefined;
    if (e.until > Date.now()) return { ...e.caller };
    this.#keys.delete(m?.[1] ?? '');
    return undefined;
  }

  async authenticate(
    authorization: string | undefined,
    teamHeader: string | undefined,
    mode: AuthMode,
  ): Promise<Caller> {
    const m = BEARER.exec(authorization ?? '');
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
    const nowMs = Date.now();
    const cached = this.#keys.get(token);
    if (cached && cached.until > nowMs) return { ...cached.caller };
    const hash = hashSecret(token);
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
      this.#keys.set(token, { caller, until: nowMs + KEY_CACHE_MS });
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
  // A callback hook, not an async one: a remembered key answers without a promise (the exec hot path).
  app.addHook('onRequest', (req: FastifyRequest, _reply, done) => {
    // Unmatched routes reach the not-found handler with no config; they need no credential.
    // Read once: Fastify builds a new routeOptions object on every access.
    const route = req.routeOptions;
    if (!route.url) return done();
    const mode = route.config.auth ?? 'key';
    if (mode === 'none' || req.method === 'OPTIONS') return done();
    const authorization = req.headers.authorization;
    const known = auth.cached(authorization, mode);
    if (known) {
      req.caller = known;
      return done();
    }
    const team = req.headers['x-svc-team'];
    auth.authenticate(authorization, typeof team === 'string' ? team : undefined, mode).then((caller) => {
      req.caller = caller;
      done();
    }, done);
  });
}
