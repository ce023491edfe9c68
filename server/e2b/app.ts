// The E2B-compatible surface as its own Fastify app on its own listener (SVC_E2B_ADDR): E2B's API
// routes and envd's on one origin, sharing the control plane's application context. API routes
// take an svc team API key in `X-API-KEY`; envd routes take the sandbox's own access token.
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { guard } from '../../shared/faults.ts';
import type { AppContext } from '../context.ts';
import { ping } from '../db/ping.ts';
import { Unauthorized } from '../errors.ts';
import { type App, createHttpApp } from '../http/app.ts';
import { type HttpLimits, httpLimits } from '../http/limits.ts';
import { readyRoute } from '../http/readiness.ts';
import { envdRoutes } from './envd.ts';
import { e2bApiRoutes } from './routes.ts';
import { E2bSandboxes } from './sandboxes.ts';

/** How often sandboxes whose timeout ran out are looked for. */
export const SWEEP_EVERY_MS = 1000;

export interface E2bOptions {
  logger: FastifyBaseLogger | false;
  version: string;
  limits?: Partial<HttpLimits>;
}

/** Paths of E2B's API (everything else on this origin is envd's). */
const isApi = (url: string) =>
  url === '/sandboxes' || url.startsWith('/sandboxes/') || url.startsWith('/v2/');

export interface E2bServer {
  app: App;
  sandboxes: E2bSandboxes;
  /** Kills the sandboxes whose time ran out now (the timer does it every SWEEP_EVERY_MS). */
  sweep(): Promise<number>;
  close(): Promise<void>;
}

export async function createE2bApp(ctx: AppContext, opts: E2bOptions): Promise<E2bServer> {
  const app = await createHttpApp({
    logger: opts.logger,
    version: opts.version,
    verbose: ctx.config.verbose,
    limits: httpLimits(opts.limits),
    errorBody: (code, message) => ({ code, message }),
  });
  const sandboxes = new E2bSandboxes(ctx);
  app.decorateRequest('caller', undefined as never);
  app.addHook('onRequest', (req: FastifyRequest, _reply, done) => {
    const url = req.routeOptions.url;
    if (!url || !isApi(url)) return done();
    const key = req.headers['x-api-key'];
    if (typeof key !== 'string' || !key.startsWith('dak_'))
      return done(new Unauthorized('X-API-KEY must carry an svc team API key (dak_…)'));
    const known = ctx.auth.cached(`Bearer ${key}`, 'key');
    if (known) {
      req.caller = known;
      return done();
    }
    ctx.auth.authenticate(`Bearer ${key}`, undefined, 'key').then((caller) => {
      req.caller = caller;
      done();
    }, done);
  });
  // For a load balancer in front of several replicas' E2B listeners (release/ha/haproxy.cfg).
  readyRoute(app, { state: () => ctx.lifecycle.state(), ping: () => ping(ctx.db) });
  e2bApiRoutes(app, sandboxes);
  envdRoutes(app, ctx, sandboxes);
  let sweeping: Promise<number> | null = null;
  const sweep = () => {
    sweeping ??= sandboxes.sweep().finally(() => {
      sweeping = null;
    });
    return sweeping;
  };
  const timer = setInterval(guard('e2b: sweep expired sandboxes', sweep), SWEEP_EVERY_MS);
  timer.unref();
  return {
    app,
    sandboxes,
    sweep,
    close: async () => {
      clearInterval(timer);
      await sweeping?.catch(() => {});
      await app.close();
    },
  };
}
