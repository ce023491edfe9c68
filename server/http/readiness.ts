// GET /health says the process answers (a supervisor restarts it when it does not); GET /ready says
// this replica should be sent traffic: it is serving, not draining after SIGTERM, and its database
// answers within a bound. A load balancer checks /ready (release/ha/haproxy.cfg), so a replica
// taken out of rotation keeps answering the requests already on their way to it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { App } from './app.ts';

export type Lifecycle = 'starting' | 'serving' | 'stopping' | 'stopped';

/** How long the database may take to answer a readiness check before the replica is not ready. */
export const READY_DB_TIMEOUT_MS = 2000;

export interface Readiness {
  state(): Lifecycle;
  /** Resolves when the database answers. */
  ping(): Promise<void>;
}

export function readinessRoutes(app: App, r: Readiness): void {
  app.get('/health', { config: { auth: 'none' }, schema: { hide: true } }, async () => ({ status: 'ok' }));
  readyRoute(app, r);
}

/** GET /ready alone: the E2B listener has envd's own /health. */
export function readyRoute(app: App, r: Readiness): void {
  app.get('/ready', { config: { auth: 'none' }, schema: { hide: true } }, async (_req, reply) => {
    const state = r.state();
    if (state !== 'serving')
      return reply.code(503).send({ status: state === 'starting' ? 'starting' : 'draining' });
    const bound = new AbortController();
    const answered = await Promise.race([
      r.ping().then(
        () => true,
        () => false,
      ),
      sleep(READY_DB_TIMEOUT_MS, false, { signal: bound.signal }).catch(() => false),
    ]);
    bound.abort();
    if (!answered) return reply.code(503).send({ status: 'database unreachable' });
    return { status: 'ready' };
  });
}
