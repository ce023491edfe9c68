// GET /metrics: Prometheus text format. Its figures are process-wide (every team's
// requests, commands and pool versions), so no team credential reads it: only the operator's
// SVC_METRICS_TOKEN (Prometheus sends it as `authorization: Bearer <token>`), compared in
// constant time. Without that variable the route answers 404. Every request's latency is
// observed by route template, so the label set stays bounded whatever paths clients send.
import { hash, timingSafeEqual } from 'node:crypto';
import type { AppContext } from '../context.ts';
import { Forbidden, NotFound, Unauthorized } from '../errors.ts';
import type { App } from '../http/app.ts';
import { Metrics } from './metrics.ts';

const BEARER = /^Bearer[ \t]+([^ \t]{1,512})[ \t]*$/i;

/** Whether the request carries `token` as its bearer credential, in time independent of the token. */
export function operatorCheck(token: string): (authorization: string | undefined) => void {
  const want = hash('sha256', token, 'buffer');
  return (authorization) => {
    if (!token) throw new NotFound('no route for GET /metrics');
    const got = authorization === undefined ? null : BEARER.exec(authorization)?.[1];
    if (!got) throw new Unauthorized('metrics need Authorization: Bearer <SVC_METRICS_TOKEN>');
    if (!timingSafeEqual(hash('sha256', got, 'buffer'), want))
      throw new Forbidden('metrics are for the operator: this is not SVC_METRICS_TOKEN');
  };
}

export function metricsRoutes(app: App, ctx: AppContext): void {
  const metrics = new Metrics({
    hostsConnected: () => ctx.hub.connectedCount?.() ?? 0,
    faults: () => ctx.faults.counts(),
    ...(ctx.cluster.shared ? { replicas: () => ctx.cluster.traffic } : {}),
  });
  app.addHook('onResponse', (req, reply, done) => {
    metrics.http.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
  app.addHook('onClose', async () => metrics.close());
  const operator = operatorCheck(ctx.config.metricsToken);
  app.get(
    '/metrics',
    {
      schema: { hide: true },
      // Not a team route: the operator's token is checked here, before anything is rendered.
      config: { auth: 'none' },
      onRequest: (req, _reply, done) => {
        try {
          operator(req.headers.authorization);
          done();
        } catch (err) {
          done(err as Error);
        }
      },
    },
    async (_req, reply) => {
      const { text, contentType } = await metrics.render();
      return reply.type(contentType).send(text);
    },
  );
}
