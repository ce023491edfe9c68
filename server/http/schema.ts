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
