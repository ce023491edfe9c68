// The HTTP application as a value (Hono-style): built here, given routes by each bounded context,
// and exercised in tests with in-process requests or on a real port. Every error leaves as
// `{error: message}` with the spec's status; bad input never becomes a 500 or a stack trace.
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  LogController,
} from 'fastify';
import { BadRequest, SvcError, TooManyRequests } from '../errors.ts';
import { installBodyTimeouts } from './body-timeouts.ts';
import { installDrainOnRefusal } from './drain.ts';
import { DEFAULT_LIMITS, type HttpLimits, mayPoison, nulPath, scanJson } from './limits.ts';
import { lazyRequestLogger } from './request-logger.ts';
import { declareResponses } from './responses.ts';
import { optionalBodies } from './schema.ts';
import { installValidation } from './validation.ts';

export type App = FastifyInstance<
  import('node:http').Server,
  import('node:http').IncomingMessage,
  import('node:http').ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** JSON bodies; file uploads and webhooks raise their own limits per route. */
export const JSON_BODY_LIMIT = 2 * 1024 * 1024;

export interface HttpOptions {
  logger: FastifyBaseLogger | boolean;
  version: string;
  verbose: boolean;
  limits?: HttpLimits;
  /** The body of every refusal; svc's is `{error}` (the E2B-compatible app answers `{code, message}`). */
  errorBody?: (status: number, message: string) => unknown;
}

const svcError = (_status: number, message: string) => ({ error: message });

function statusOf(err: FastifyError): { status: number; message: string } {
  if (err instanceof SvcError) return { status: err.status, message: err.message };
  if (err.validation) {
    const where = err.validationContext ?? 'request';
    return {
      status: 400,
      message: `${where}${err.message.replace(/^(body|querystring|params|headers)/, '')}`,
    };
  }
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, message: 'request body too large' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return {
        status: 400,
        message: `unsupported content type: ${err.message.replace(/^Unsupported Media Type: /, '')}`,
      };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, message: 'empty JSON body' };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, message: `malformed JSON body: ${err.message}` };
  }
  if (err instanceof SyntaxError) return { status: 400, message: `malformed JSON body: ${err.message}` };
  const status = err.statusCode ?? 500;
  if (status >= 400 && status < 500) return { status, message: err.message };
  return { status: 500, message: 'internal error' };
}

export async function createHttpApp(opts: HttpOptions): Promise<App> {
  const limits = opts.limits ?? DEFAULT_LIMITS;
  const errorBody = opts.errorBody ?? svcError;
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  const app = Fastify({
    // A connection holding part of a request (headers or a declared body) is closed, and so
    // is an idle keep-alive one. Answers are not timed: a sandbox may wait its timeout_sec.
    // Node's own bound is only the backstop: body-timeouts.ts bounds each route's body.
    requestTimeout: Math.max(limits.requestTimeoutMs, limits.uploadTimeoutMs),
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      headersTimeout,
      connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(headersTimeout / 4))),
    },
    logger: opts.logger,
    // Per-request lines only with -v: at thousands of requests a second they are noise.
    logController: new LogController({ disableRequestLogging: !opts.verbose }),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: JSON_BODY_LIMIT,
    // Handlers own the answer; a client that goes away must not leave work half-recorded.
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    // The router's own refusals (a malformed %-escape, an over-long path parameter) would
    // otherwise leave in Fastify's default shape; they are bad input like any other.
    frameworkErrors: (err: FastifyError, _req, reply: import('fastify').FastifyReply) => {
      const message =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is too long' : 'malformed URL';
      reply.code(400).send(errorBody(400, message));
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // A JSON content type with an empty body (what many clients send on a bodiless POST) means
  // "no body": optional-body routes accept it, required-body routes still answer 400.
  app.removeContentTypeParser('application/json');
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    // Depth is bounded before JSON.parse pays for it (deep nesting costs time and stack); no text
    // anywhere holds a NUL
    // (no argv, variable, name or path can, and Postgres refuses it in TEXT columns).
    const scan = scanJson(text, limits.jsonDepth);
    if (scan.depth > limits.jsonDepth) {
      return done(new BadRequest(`the JSON body is nested deeper than ${limits.jsonDepth} levels`));
    }
    const parsed = (err: Error | null, value: unknown) => {
      const at = !err && scan.nul ? nulPath(value) : null;
      if (at) return done(new BadRequest(`${at} contains a NUL character`));
      done(err, value);
    };
    if (mayPoison(text)) return json(req, text, parsed);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return json(req, text, parsed); // Fastify's parser words the 400
    }
    parsed(null, value);
  });
  app.server.maxConnections = limits.maxConnections;
  // Callback hooks here and in the other per-request hooks: no promise per request (the exec hot path).
  const markOptional = optionalBodies(app);
  app.addHook('onRequest', (req, _reply, done) => {
    done(req.url.includes('%00') ? new BadRequest('the URL contains a NUL character') : undefined);
  });

  installValidation(app as unknown as App);
  installDrainOnRefusal(app as unknown as App, limits);
  installBodyTimeouts(app as unknown as App, limits);
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const { status, message } = statusOf(err);
    // A host or upstream refusing (502/503/504) is an expected answer: one warn line, no stack.
    if (status >= 500 && err instanceof SvcError) req.log.warn({ status, error: message }, 'request refused');
    else if (status >= 500) req.log.error({ err }, 'request failed');
    if (err instanceof TooManyRequests) reply.header('retry-after', String(err.retryAfterSec));
    reply.code(status).send(errorBody(status, message));
  });
  app.setNotFoundHandler((req, reply) => {
    reply.code(404).send(errorBody(404, `no route for ${req.method} ${req.url.split('?')[0]}`));
  });

  await app.register(swagger, {
    transformObject: (doc) => markOptional('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject),
    openapi: {
      openapi: '3.1.0',
      info: { title: 'svc control plane', version: opts.version },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'dak_ API key or dst_ session' },
        },
      },
    },
  });
  declareResponses(app as unknown as FastifyInstance);
  app.get('/openapi.json', { schema: { hide: true }, config: { auth: 'none' } }, async () => app.swagger());
  return app as unknown as App;
}
