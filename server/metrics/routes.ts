// GET /metrics (issue 15): Prometheus text format, behind an API key like every other route
// (Prometheus sends it as `authorization: Bearer <key>`). Every request's latency is observed
// by route template, so the label set stays bounded whatever paths clients send.

import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { Metrics } from './metrics.ts';

export function metricsRoutes(app: App, ctx: AppContext): void {
  const metrics = new Metrics({ hostsConnected: () => ctx.hub.connectedCount?.() ?? 0 });
  app.addHook('onResponse', (req, reply, done) => {
    metrics.http.observe(
      { method: req.method, route: req.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
  app.addHook('onClose', async () => metrics.close());
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    const { text, contentType } = await metrics.render();
    return reply.type(contentType).send(text);
  });
}
