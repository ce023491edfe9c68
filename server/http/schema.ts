// TypeBox building blocks shared by route modules (the wording of refusals is in validation.ts). Schemas
// both validate requests and feed the OpenAPI document, so they say what a field is for.
import { type TString, Type } from '@sinclair/typebox';

export { Body, StringEnum } from '../../protocol/api/kit.ts';

/** Path parameter for an object addressed by id (environments, deployments, keys). */
export const IdParam = <K extends string>(name: K, description: string) =>
  Type.Object({ [name]: Type.String({ minLength: 1, maxLength: 128, description }) } as Record<K, TString>);

export const SECURED = [{ bearer: [] }];

/**
 * A preValidation hook for routes whose whole body is optional: no body at all means `{}`, so a
 * bare `POST` works like the spec's "empty body" while a non-object body is still refused.
 */
export async function emptyBodyIsObject(req: { body: unknown }): Promise<void> {
  if (req.body === undefined || req.body === null) req.body = {};
}

type RouteSeen = { method: string | string[]; url: string; preValidation?: unknown };
type OpenApiDoc = { paths?: Record<string, Record<string, { requestBody?: { required?: boolean } }>> };

/**
 * Records the routes whose body may be left out (those with `emptyBodyIsObject`), so the OpenAPI
 * document can say so: @fastify/swagger marks every route with a body schema `required`, and a
 * generated client would then insist on a body the server does not need. Call before the routes.
 */
export function optionalBodies(app: { addHook(name: 'onRoute', hook: (r: RouteSeen) => void): unknown }) {
  const keys = new Set<string>();
  app.addHook('onRoute', (r) => {
    const hooks = Array.isArray(r.preValidation) ? r.preValidation : [r.preValidation];
    if (!hooks.includes(emptyBodyIsObject)) return;
    // Fastify's `:name` parameters are OpenAPI's `{name}`; these are our own route strings.
    const path = r.url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    for (const m of Array.isArray(r.method) ? r.method : [r.method]) keys.add(`${m.toLowerCase()} ${path}`);
  });
  return <T>(doc: T): T => {
    const paths = (doc as OpenApiDoc).paths ?? {};
    for (const key of keys) {
      const [method, path] = key.split(' ');
      const body = paths[path]?.[method]?.requestBody;
      if (body) body.required = false;
    }
    return doc;
  };
}
