// TypeBox building blocks shared by route modules, and the wording of schema refusals. Schemas
// both validate requests and feed the OpenAPI document, so they say what a field is for.
import { type TSchema, type TString, type TUnsafe, Type } from '@sinclair/typebox';
import type { FastifySchemaValidationError } from 'fastify/types/schema.js';
import type { App } from './app.ts';

/**
 * A string restricted to `values`, typed as their union; ajv reports it as an `enum`. The route
 * type provider infers with typebox 1.x, which reads enums by its `~kind` marker, hence the cast.
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  opts: { description?: string } = {},
) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...opts }) as TUnsafe<T[number]> & {
    '~kind': 'Enum';
    enum: [...T];
  };
}

/** A request body object: unknown fields are refused (they are usually typos). */
export function Body<T extends Record<string, TSchema>>(props: T, description?: string) {
  return Type.Object(props, { additionalProperties: false, description });
}

/** Path parameter for an object addressed by id (environments, deployments, keys). */
export const IdParam = <K extends string>(name: K, description: string) =>
  Type.Object({ [name]: Type.String({ minLength: 1, maxLength: 128, description }) } as Record<K, TString>);

export const SECURED = [{ bearer: [] }];

interface AjvError extends FastifySchemaValidationError {
  params: Record<string, unknown>;
}

/** `body/kind` → `body.kind`; the root is the data variable itself. */
function where(dataVar: string, e: AjvError): string {
  const path = e.instancePath
    .split('/')
    .filter(Boolean)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('');
  return `${dataVar}${path}`;
}

/** One clear sentence per refusal: which field, and what it should have been. */
export function describeValidation(errors: FastifySchemaValidationError[], dataVar: string): string {
  const e = errors[0] as AjvError;
  const at = where(dataVar, e);
  switch (e.keyword) {
    case 'enum':
      return `${at} must be one of ${(e.params.allowedValues as unknown[]).join(', ')}`;
    case 'additionalProperties':
      return `${at} has an unknown field '${String(e.params.additionalProperty)}'`;
    case 'required':
      return `${at}.${String(e.params.missingProperty)} is required`;
    default:
      return `${at} ${e.message ?? 'is invalid'}`;
  }
}

/** Installs the wording above for every route registered on `app`. */
export function installValidationMessages(app: App): void {
  app.setSchemaErrorFormatter((errors, dataVar) => new Error(describeValidation(errors, dataVar)));
}

/**
 * A preValidation hook for routes whose whole body is optional: no body at all means `{}`, so a
 * bare `POST` works like the spec's "empty body" while a non-object body is still refused.
 */
export async function emptyBodyIsObject(req: { body: unknown }): Promise<void> {
  if (req.body === undefined || req.body === null) req.body = {};
}
