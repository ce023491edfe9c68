// The API's one definition, as the CLI sees it: the `paths` that openapi-typescript generated from
// the server's own OpenAPI document (clients/typescript/src/schema.d.ts). Only types come from there
// (the import is erased), so the CLI bundle gains no run-time code, yet every typed call is checked
// by tsc against the route's path template, method, path parameters, query, JSON body and 2xx answer:
// a route or field renamed on the server breaks the CLI's typecheck instead of its users.
import type { paths } from '../clients/typescript/src/schema.d.ts';

export type ApiMethod = 'get' | 'post' | 'put' | 'delete' | 'patch';
export type ApiPath = keyof paths;

/** The path templates that have an operation for `M`. */
export type PathOf<M extends ApiMethod> = {
  [P in ApiPath]: paths[P] extends { [K in M]: object } ? P : never;
}[ApiPath];

type Op<M extends ApiMethod, P extends PathOf<M>> = paths[P][M & keyof paths[P]];

type Json<R> = R extends { content: never }
  ? undefined
  : R extends { content: { 'application/json': infer J } }
    ? J
    : undefined;
type Success = 200 | 201 | 202 | 204;

/** The JSON of the operation's 2xx answers (undefined for one without a JSON body). */
export type ApiAnswer<M extends ApiMethod, P extends PathOf<M>> =
  Op<M, P> extends { responses: infer R }
    ? { [S in keyof R & Success]: Json<R[S]> }[keyof R & Success]
    : never;

/** The operation's JSON request body; never when it takes none (or not JSON). */
export type ApiBody<M extends ApiMethod, P extends PathOf<M>> =
  Op<M, P> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;

type Params<M extends ApiMethod, P extends PathOf<M>> = Op<M, P> extends { parameters: infer X } ? X : object;
type Stringy<T> = { [K in keyof T]: T[K] & (string | number | boolean) };

// Each part of the options is required exactly when the operation requires it.
type PathPart<X> = X extends { path: infer V } ? { path: Stringy<V> } : { path?: undefined };
type QueryPart<X> = X extends { query: infer Q }
  ? { query: Stringy<Q> }
  : X extends { query?: infer Q }
    ? { query?: Stringy<NonNullable<Q>> }
    : { query?: undefined };
type BodyPart<O> = O extends { requestBody: { content: { 'application/json': infer B } } }
  ? { json: B }
  : O extends { requestBody?: { content: { 'application/json': infer B } } }
    ? { json?: B }
    : { json?: undefined };

/** What a typed call takes besides its method and path template. */
export type ApiOptions<M extends ApiMethod, P extends PathOf<M>> = PathPart<Params<M, P>> &
  QueryPart<Params<M, P>> &
  BodyPart<Op<M, P>> & {
    /** A raw body with its content type (an operation whose body the OpenAPI leaves untyped). */
    raw?: { data: Uint8Array; type: string };
    /** A streamed body (large uploads), sent with its length. */
    stream?: { body: ReadableStream; type: string; length: number };
    /** Send the credential (default true). */
    auth?: boolean;
  };

/** Fills `{name}` segments of a path template, each encoded; a missing one is a bug of the caller. */
export function fillPath(template: string, values: Record<string, unknown> | undefined): string {
  return template.replace(/\{([a-z_]{1,40})\}/g, (_, name: string) => {
    const v = values?.[name];
    if (v === undefined) throw new Error(`no value for {${name}} in ${template}`);
    return encodeURIComponent(String(v));
  });
}

/** A query of strings, numbers and booleans as the URL's strings; undefined values are left out. */
export function queryStrings(q: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(q ?? {})) if (v !== undefined) out[k] = String(v);
  return out;
}
