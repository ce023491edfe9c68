// Every bounded context's routes, registered on one app. A route parses, calls one domain
// method and returns; the domain lives in the context folders.

import { cloudRoutes } from './clouds/routes.ts';
import { codehostRoutes } from './codehost/routes.ts';
import { consoleRoutes } from './console/routes.ts';
import type { AppContext } from './context.ts';
import { ping } from './db/ping.ts';
import { deploymentReadRoutes } from './deployments/read-routes.ts';
import { fsRoutes } from './envs/fs-routes.ts';
import { envReadRoutes } from './envs/read-routes.ts';
import { envRoutes } from './envs/routes.ts';
import { eventRoutes } from './events/routes.ts';
import { eventStreamRoutes } from './events/stream.ts';
import { hostRoutes } from './hosts/routes.ts';
import type { App } from './http/app.ts';
import { readinessRoutes } from './http/readiness.ts';
import { deviceRoutes } from './identity/device-routes.ts';
import { identityRoutes } from './identity/routes.ts';
import { metricsRoutes } from './metrics/routes.ts';
import { poolRoutes } from './pool/routes.ts';
import { processRoutes } from './processes/routes.ts';
import { projectRoutes } from './projects/routes.ts';
import { providerRoutes } from './providers/routes.ts';
import { releaseRoutes } from './releases/routes.ts';
import { sandboxRoutes } from './sandboxes/routes.ts';
import { uploadRoutes } from './uploads/routes.ts';

export type RouteModule = (app: App, ctx: AppContext) => void | Promise<void>;

const modules: RouteModule[] = [
  metricsRoutes, // first: its onResponse hook observes every route
  (app, ctx) => readinessRoutes(app, { state: () => ctx.lifecycle.state(), ping: () => ping(ctx.db) }),
  releaseRoutes,
  identityRoutes,
  deviceRoutes,
  projectRoutes,
  envReadRoutes,
  envRoutes,
  fsRoutes,
  processRoutes,
  sandboxRoutes,
  poolRoutes,
  deploymentReadRoutes,
  cloudRoutes,
  hostRoutes,
  providerRoutes,
  eventRoutes,
  eventStreamRoutes,
  codehostRoutes,
  consoleRoutes,
  uploadRoutes,
];

export async function registerRoutes(app: App, ctx: AppContext): Promise<void> {
  for (const m of modules) await m(app, ctx);
}
