// Request rates: routes that need no credential per client address, webhook deliveries per client
// address, failed authentications per client address (counted when the answer is a 401, refused
// at the next request once over), and every request per credential. An exceeded limit is a 429
// `{error}` with `Retry-After`.
//
// Several control-plane replicas share the limits that stop guessing, counted in the database
// (cluster/store.ts): the sign-in steps (`/auth/…`, `/v1/device/…`) and failed authentications
// per address; kept per process, a balancer over N replicas would allow N times the guesses. A
// replica learns of an address over the failure limit from the database every second, and checks
// its own copy of that list on every request, so the hot path makes no database round trip.
// The other limits protect the process that serves the request (its CPU, its memory, its event
// loop) and stay in its memory (@fastify/rate-limit): per credential (every request, the exec hot
// path included: a database write per request would cost more than the limit saves), webhook
// deliveries, and the other anonymous routes (console assets, releases, the OpenAPI document).
import rateLimit from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import { guard } from '../../shared/faults.ts';
import { dropExpired, hitWindow, windowsOver } from '../cluster/store.ts';
import type { Db } from '../db/types.ts';
import { TooManyRequests } from '../errors.ts';
import { BLOB_PATH } from '../hosts/blobs.ts';
import type { App } from './app.ts';
import type { HttpLimits } from './limits.ts';

/** The code host's webhook route (server/codehost/routes.ts). */
export const WEBHOOK_PATH = '/webhooks/codehost';

const WINDOW_MS = 60_000;
/** How often a replica reads the addresses that are over a shared limit. */
export const SHARED_REFRESH_MS = 1000;
/** Addresses over a shared limit kept per refresh (memory stays bounded under a wide attack). */
const MAX_BLOCKED = 100_000;
/** Anonymous routes whose requests are sign-in steps, counted across replicas. */
const SIGN_IN = /^\/(auth|v1\/device)\//;
/** Health checks, sidecar downloads and the OpenAPI document stay reachable under any load. */
const UNLIMITED = new Set(['/health', '/ready', '/openapi.json', '/install.sh']);

type Check = (
  req: FastifyRequest,
  opts?: { increment?: boolean },
) => Promise<{ isExceeded?: boolean; remaining?: number; ttl?: number }>;

function refusal(what: string, ttlMs: number | undefined): TooManyRequests {
  const after = Math.max(1, Math.ceil((ttlMs ?? WINDOW_MS) / 1000));
  return new TooManyRequests(`too many ${what}; retry in ${after} s`, after);
}

function refuse(what: string, ttlMs: number | undefined): never {
  throw refusal(what, ttlMs);
}

/** Addresses over a shared limit until their windows end, refreshed from the database. */
class SharedLimits {
  readonly #db: Db;
  readonly #blocked = new Map<string, number>();
  readonly #failMax: number;
  readonly #anonMax: number;
  #timer: NodeJS.Timeout | null = null;
  #refreshing: Promise<void> | null = null;

  constructor(db: Db, failMax: number, anonMax: number) {
    this.#db = db;
    this.#failMax = failMax;
    this.#anonMax = anonMax;
  }

  /** ms left of the window that blocks `key`, 0 when it is not blocked. */
  blocked(key: string, at = Date.now()): number {
    const until = this.#blocked.get(key);
    if (until === undefined) return 0;
    if (until > at) return until - at;
    this.#blocked.delete(key);
    return 0;
  }

  /** Counts a hit of `key` (anon:… or fail:…); blocks it here at once when it reached `max`. */
  async hit(key: string, max: number): Promise<{ count: number; ttl: number }> {
    const at = Date.now();
    const w = await hitWindow(this.#db, key, WINDOW_MS, at);
    if (w.count >= max && this.#blocked.size < MAX_BLOCKED) this.#blocked.set(key, w.resetAt);
    return { count: w.count, ttl: w.resetAt - at };
  }

  start(): void {
    this.#timer = setInterval(
      guard('rate limits: refresh shared windows', () => {
        this.#refreshing ??= this.refresh()
          .catch(() => {})
          .finally(() => {
            this.#refreshing = null;
          });
      }),
      SHARED_REFRESH_MS,
    );
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#refreshing;
  }

  /** Reads the addresses over a shared limit (any replica counted them) and drops ended windows. */
  async refresh(at = Date.now()): Promise<void> {
    const over = [
      ...(this.#failMax > 0 ? await windowsOver(this.#db, 'fail:', this.#failMax, MAX_BLOCKED, at) : []),
      ...(this.#anonMax > 0 ? await windowsOver(this.#db, 'anon:', this.#anonMax, MAX_BLOCKED, at) : []),
    ];
    for (const [k, until] of this.#blocked) if (until <= at) this.#blocked.delete(k);
    for (const o of over) if (this.#blocked.size < MAX_BLOCKED) this.#blocked.set(o.key, o.resetAt);
    await dropExpired(this.#db, 'rate_windows', 'key', 'reset_at', new Date(at).toISOString());
  }
}

export async function installRateLimits(app: App, limits: HttpLimits, db: Db): Promise<void> {
  await app.register(rateLimit, { global: false });
  const make = (max: number, keyGenerator?: (req: FastifyRequest) => string): Check | null =>
    max > 0
      ? (app.createRateLimit({
          max,
          timeWindow: WINDOW_MS,
          ...(keyGenerator ? { keyGenerator } : {}),
        }) as Check)
      : null;
  const anon = make(limits.anonPerMinute);
  const webhooks = make(limits.webhooksPerMinute);
  const perCredential = make(limits.perCredentialPerMinute, (req) => {
    const c = req.caller;
    return c.keyId ? `key:${c.keyId}` : `user:${c.userId}:${c.teamId}`;
  });
  const shared = new SharedLimits(db, limits.authFailuresPerMinute, limits.anonPerMinute);
  if (limits.authFailuresPerMinute > 0 || limits.anonPerMinute > 0) {
    app.addHook('onReady', async () => shared.start());
    app.addHook('onClose', async () => shared.stop());
  }

  // Callback hooks: most requests pass without a promise (the exec hot path).
  const settle = (check: Promise<unknown>, done: (err?: Error) => void) =>
    void check.then(() => done(), done);
  const peekFailures = (req: FastifyRequest, done: (err?: Error) => void) => {
    if (limits.authFailuresPerMinute <= 0) return done();
    const ttl = shared.blocked(`fail:${req.ip}`);
    if (ttl > 0) return done(refusal('failed authentications from this address', ttl));
    done();
  };
  app.addHook('onRequest', (req, _reply, done) => {
    // Read once: Fastify builds a new routeOptions object on every access.
    const { url, config } = req.routeOptions;
    if (!url || req.method === 'OPTIONS' || UNLIMITED.has(url) || url.startsWith('/svcd')) return done();
    // Blob transfers carry one-time tokens and come from a host's one address at a training
    // loop's pace.
    if (url.startsWith(BLOB_PATH)) return done();
    // Webhooks come from the code host's few shared addresses, so their own, larger per-address
    // budget; an address whose signatures fail is refused like any failed authentication.
    if (url === WEBHOOK_PATH) {
      if (!webhooks) return peekFailures(req, done);
      return settle(
        webhooks(req).then((r) => {
          if (r.isExceeded) refuse('webhook deliveries from this address', r.ttl);
        }),
        (err) => (err ? done(err) : peekFailures(req, done)),
      );
    }
    if ((config.auth ?? 'key') === 'none') {
      if (limits.anonPerMinute <= 0) return done();
      if (SIGN_IN.test(url)) {
        const key = `anon:${req.ip}`;
        const ttl = shared.blocked(key);
        if (ttl > 0) return done(refusal('requests from this address', ttl));
        return settle(
          shared.hit(key, limits.anonPerMinute).then((r) => {
            if (r.count > limits.anonPerMinute) refuse('requests from this address', r.ttl);
          }),
          done,
        );
      }
      return settle(
        (anon as Check)(req).then((r) => {
          if (r.isExceeded) refuse('requests from this address', r.ttl);
        }),
        done,
      );
    }
    peekFailures(req, done);
  });
  if (limits.authFailuresPerMinute > 0) {
    // Counted before the 401 is sent: the client's next request (on any replica) finds it counted.
    app.addHook('onSend', (req, reply, payload, done) => {
      if (reply.statusCode !== 401) return done(null, payload);
      shared.hit(`fail:${req.ip}`, limits.authFailuresPerMinute).then(
        () => done(null, payload),
        () => done(null, payload),
      );
    });
  }
  if (perCredential) {
    // After the auth hook: the caller is known.
    app.addHook('preHandler', (req, _reply, done) => {
      if (!req.caller) return done();
      settle(
        perCredential(req).then((r) => {
          if (r.isExceeded) refuse('requests with this credential', r.ttl);
        }),
        done,
      );
    });
  }
}
