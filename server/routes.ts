// Every bounded context's routes, registered on one app. A route parses, calls one domain
// method and returns; the domain lives in the context folders.

import type { AppContext } from './context.ts';
import type { App } from './http/app.ts';

export type RouteModule = (app: App, ctx: AppContext) => void | Promise<void>;

const modules: RouteModule[] = [
  (app) => {
    app.get('/health', { config: { auth: 'none' }, schema: { hide: true } }, async () => ({ status: 'ok' }));
  },
];

export async function registerRoutes(app: App, ctx: AppContext): Promise<void> {
  for (const m of modules) await m(app, ctx);
}
