// Cross-origin behaviour (spec "Cross-origin behaviour"): only with SVC_CONSOLE_URL set, and only
// on /v1/* and /auth/*, requests from the console origin or a loopback http origin get the CORS
// headers; preflights there answer 204. Without SVC_CONSOLE_URL no CORS header is ever sent.
import type { App } from './app.ts';

export const ALLOW_HEADERS = 'Authorization, Content-Type, X-Svc-Team';
export const ALLOW_METHODS = 'GET, POST, PUT, DELETE, OPTIONS';
export const MAX_AGE_SEC = 600;

const LOOPBACK = /^http:\/\/(localhost|127\.0\.0\.1)(:\d{1,5})?$/;

function corsPath(url: string): boolean {
  return url.startsWith('/v1/') || url.startsWith('/auth/');
}

/** The origin to echo back, or null when `origin` may not read the answer. */
export function allowedOrigin(consoleOrigin: string, origin: string | undefined): string | null {
  if (!origin) return null;
  if (origin === consoleOrigin || LOOPBACK.test(origin)) return origin;
  return null;
}

export function installCors(app: App, consoleUrl: string): void {
  if (!consoleUrl) return;
  const consoleOrigin = new URL(consoleUrl).origin;
  // onSend runs for every answer (errors and not-found included), so a 401 is readable by the console.
  app.addHook('onSend', (req, reply, payload, done) => {
    if (corsPath(req.url)) {
      reply.header('vary', 'Origin');
      const origin = allowedOrigin(consoleOrigin, req.headers.origin);
      if (origin) {
        reply.header('access-control-allow-origin', origin);
        reply.header('access-control-allow-headers', ALLOW_HEADERS);
        reply.header('access-control-allow-methods', ALLOW_METHODS);
        reply.header('access-control-max-age', String(MAX_AGE_SEC));
      }
    }
    done(null, payload);
  });
  for (const url of ['/v1/*', '/auth/*']) {
    app.options(url, { config: { auth: 'none' }, schema: { hide: true } }, async (_req, reply) => {
      reply.code(204).send();
    });
  }
}
