// The console, served by the control plane on its own origin: GET /app/* answers the
// single-page app (every page path gets index.html; the router in the browser picks the page),
// /app/assets/<hashed name> its script and stylesheet, /app/config.json which sign-in methods
// this server offers. GET /device (the verification URL of earlier releases) redirects to the
// console's device page when no SVC_CONSOLE_URL names another console. A content security policy
// keeps the page to its own origin: it cannot load or read anything from another one. The one
// exception to `style-src 'self'` is a per-response nonce: the terminal (xterm.js) writes its
// theme into <style> elements it creates, and the page stamps them with the nonce it finds on
// its stylesheet's <link> (console/src/style-nonce.ts); injected markup cannot know it. Style
// attributes are allowed (style-src-attr) for the terminal's 24-bit colours.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { ASSETS_PATH, buildConsole, CONSOLE_DIST, consoleStale } from './bundle.ts';

export const CONSOLE_PATH = '/app/';

const csp = (nonce?: string) =>
  [
    "default-src 'none'",
    "script-src 'self'",
    nonce ? `style-src 'self' 'nonce-${nonce}'` : "style-src 'self'",
    // xterm.js colours a 24-bit-colour cell with a style attribute. Attributes only (no selectors,
    // no <style>), and img-src/default-src still keep any url() in one to this origin.
    "style-src-attr 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

interface Built {
  index: string;
  assets: Map<string, { body: Buffer; type: string }>;
}

/** Loads console/dist, building it first when the sources are newer. */
async function load(log: FastifyBaseLogger): Promise<Built | { error: string }> {
  if (consoleStale()) {
    try {
      await buildConsole();
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'could not build the console; serving the last build');
    }
  }
  try {
    const index = readFileSync(join(CONSOLE_DIST, 'index.html'), 'utf8');
    const assets: Built['assets'] = new Map();
    for (const m of index.matchAll(/\/app\/assets\/([A-Za-z0-9_.-]+)"/g)) {
      const ext = m[1].split('.').pop() ?? '';
      assets.set(m[1], {
        body: readFileSync(join(CONSOLE_DIST, 'assets', m[1])),
        type: TYPES[ext] ?? 'application/octet-stream',
      });
    }
    return { index, assets };
  } catch {
    return { error: 'the console is not built: run `npm ci` (or `npm run build:console`) in the checkout' };
  }
}

function pageHeaders(reply: import('fastify').FastifyReply, nonce?: string): void {
  reply
    .header('content-security-policy', csp(nonce))
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY');
}

export function consoleRoutes(app: App, ctx: AppContext): void {
  const { config } = ctx;
  // Read once per app, at the first page asked for: the files are the checkout's, the same in
  // every replica.
  let loading: Promise<Built | { error: string }> | null = null;
  const files = () => {
    loading ??= load(app.log);
    return loading;
  };
  const route = { config: { auth: 'none' as const }, schema: { hide: true } };

  app.get('/app', route, async (_req, reply) => reply.redirect(CONSOLE_PATH, 308));

  app.get('/app/config.json', route, async (_req, reply) => {
    reply.header('cache-control', 'no-store');
    return {
      dev_login: config.devLogin,
      codehost_sign_in: Boolean(config.codehost.clientId && config.codehost.clientSecret),
    };
  });

  app.get<{ Params: { name: string } }>(`${ASSETS_PATH}:name`, route, async (req, reply) => {
    const built = await files();
    const file = built && 'assets' in built ? built.assets.get(req.params.name) : undefined;
    if (!file) return reply.code(404).send({ error: `no console file ${req.params.name}` });
    pageHeaders(reply);
    return reply
      .header('cache-control', 'public, max-age=31536000, immutable')
      .type(file.type)
      .send(file.body);
  });

  app.get('/app/*', route, async (_req, reply) => {
    const built = await files();
    const nonce = randomBytes(16).toString('base64');
    pageHeaders(reply, nonce);
    reply.header('cache-control', 'no-cache');
    if (!built || 'error' in built) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send(built?.error ?? 'console unavailable');
    }
    return reply
      .type('text/html; charset=utf-8')
      .send(built.index.replace('<link rel="stylesheet"', `<link rel="stylesheet" nonce="${nonce}"`));
  });

  // Earlier releases printed <public-url>/device?code=… (without a console URL): send those links
  // to the console's page. A configured console is the only verification page.
  if (config.consoleUrl) return;
  app.get<{ Querystring: { code?: string } }>('/device', route, async (req, reply) => {
    const code = typeof req.query.code === 'string' ? req.query.code.slice(0, 32) : '';
    const to = code
      ? `${CONSOLE_PATH}device/?user_code=${encodeURIComponent(code)}`
      : `${CONSOLE_PATH}device/`;
    return reply.redirect(to, 302);
  });
}
