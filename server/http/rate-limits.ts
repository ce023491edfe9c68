// Request rates, with @fastify/rate-limit's in-memory windows: routes that need no
// credential per client address, webhook deliveries per client address, failed authentications per client address (counted when the
// answer is a 401, refused at the next request once over), and every request per credential.
// An exceeded limit is a 429 `{error}` with `Retry-After`.
import rateLimit from '@fastify/rate-limit';
import type { FastifyRequest } from 'fastify';
import { TooManyRequests } from '../errors.ts';
import { BLOB_PATH } from '../hosts/blobs.ts';
import type { App } from './app.ts';
import type { HttpLimits } from './limits.ts';

/** The code host's webhook route (server/codehost/routes.ts). */
export const WEBHOOK_PATH = '/webhooks/codehost';

const WINDOW_MS = 60_000;
/** Health checks, sidecar downloads and the OpenAPI document stay reachable under any load. */
const UNLIMITED = new Set(['/health', '/ready', '/openapi.json', '/install.sh']);

type Check = (
  req: FastifyRequest,
  opts?: { increment?: boolean },
) => Promise<{ isExceeded?: boolean; remaining?: number; ttl?: number }>;

function refuse(what: string, ttlMs: number | undefined): never {
  const after = Math.ceil((ttlMs ?? WINDOW_MS) / 1000);
  throw new TooManyRequests(`too many ${what}; retry in ${after} s`, after);
}

export async function installRateLimits(app: App, limits: HttpLimits): Promise<void> {
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
  const failures = make(limits.authFailuresPerMinute);
  const webhooks = make(limits.webhooksPerMinute);
  const perCredential = make(limits.perCredentialPerMinute, (req) => {
    const c = req.caller;
    return c.keyId ? `key:${c.keyId}` : `user:${c.userId}:${c.teamId}`;
  });

  // Callback hooks: most requests pass without a promise (the exec hot path). Failed
  // authentications are rare, so the per-address peek runs only while one was answered in the
  // window (it cannot find any count otherwise); a 401 starts a window again.
  let lastFailureAt = Number.NEGATIVE_INFINITY;
  const settle = (check: Promise<unknown>, done: (err?: Error) => void) =>
    void check.then(() => done(), done);
  const peekFailures = (req: FastifyRequest, done: (err?: Error) => void) => {
    if (!failures || Date.now() - lastFailureAt >= WINDOW_MS) return done();
    // A peek: the failures so far are counted, this request is not (yet).
    settle(
      failures(req, { increment: false }).then((r) => {
        if (r.isExceeded || r.remaining === 0) refuse('failed authentications from this address', r.ttl);
      }),
      done,
    );
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
      if (!anon) return done();
      return settle(
        anon(req).then((r) => {
          if (r.isExceeded) refuse('requests from this address', r.ttl);
        }),
        done,
      );
    }
    peekFailures(req, done);
  });
  if (failures) {
    app.addHook('onResponse', (req, reply, done) => {
      if (reply.statusCode !== 401) return done();
      lastFailureAt = Date.now();
      settle(failures(req), done);
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
