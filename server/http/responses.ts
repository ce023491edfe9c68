// Every route's answers, declared once in protocol/api.ts, are attached here when the route is
// registered: they describe the API in /openapi.json (and so the generated clients), and with
// SVC_CHECK_RESPONSES=1 (set by `npm test`) every JSON answer is checked against its schema, so a
// declared shape can never drift from what a route really sends. They never change what is sent:
// answers are serialised with JSON.stringify, not by the schema.
import type { TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, RESPONSES } from '../../protocol/api.ts';

const checks = new WeakMap<TSchema, TypeCheck<TSchema>>();
function checkerOf(schema: TSchema): TypeCheck<TSchema> {
  let c = checks.get(schema);
  if (!c) {
    c = TypeCompiler.Compile(schema);
    checks.set(schema, c);
  }
  return c;
}

/** What a route answers: its own declaration or ours, and `{error}` for every failure. */
function responsesOf(method: string, url: string, own: unknown): Record<string, unknown> | undefined {
  const ours = RESPONSES[`${method} ${url}`];
  if (!ours && !own) return undefined;
  return { '4xx': ErrorBody, '5xx': ErrorBody, ...ours, ...(own as object | undefined) };
}

export function declareResponses(
  app: FastifyInstance,
  check = process.env.SVC_CHECK_RESPONSES === '1',
): void {
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      const response = responsesOf(method, route.url ?? route.path, route.schema?.response);
      if (response) route.schema = { ...route.schema, response };
    }
  });
  if (!check) return;
  app.addHook('onSend', async (req, reply, payload) => {
    const declared = reply.routeOptions.schema?.response as Record<string, TSchema> | undefined;
    const type = String(reply.getHeader('content-type') ?? '');
    if (!declared || typeof payload !== 'string' || !type.startsWith('application/json')) return payload;
    const status = reply.statusCode;
    const schema = declared[status] ?? declared[`${String(status)[0]}xx`];
    if (!schema) {
      reply.code(500);
      return JSON.stringify({
        error: `answer ${status} is not declared for ${req.method} ${req.routeOptions.url}`,
      });
    }
    const body = JSON.parse(payload);
    const check = checkerOf(schema);
    if (check.Check(body)) return payload;
    const first = check.Errors(body).First();
    reply.code(500);
    return JSON.stringify({
      error: `answer ${status} of ${req.method} ${req.routeOptions.url} does not match its schema: ${first?.path} ${first?.message}`,
    });
  });
}
