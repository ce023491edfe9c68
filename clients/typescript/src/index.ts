// TypeScript client of the svc control plane: openapi-fetch over the types that openapi-typescript
// generated from the server's /openapi.json (src/schema.d.ts), so every path, parameter, body and
// answer is typed. Every answer of 4xx or 5xx is thrown as SvcError(status, message).
//
//   const svc = createSvcClient({ server: 'http://localhost:8080', apiKey: process.env.SVC_API_KEY });
//   const { environment } = await ok(svc.GET('/v1/envs/{env}', { params: { path: { env: id } } }));
import createClient from 'openapi-fetch';
import type { paths } from './schema.d.ts';

export type { paths } from './schema.d.ts';

export class SvcError extends Error {
  readonly status: number;
  readonly method: string;
  readonly path: string;
  constructor(status: number, message: string, method: string, path: string) {
    super(message);
    this.name = 'SvcError';
    this.status = status;
    this.method = method;
    this.path = path;
  }
}

export interface SvcClientOptions {
  /** The control plane's base URL. */
  server: string;
  /** A `dak_` API key or a `dst_` session. */
  apiKey?: string;
  /** `X-Svc-Team` for a session that belongs to several teams. */
  team?: string;
  fetch?: typeof globalThis.fetch;
}

export function createSvcClient(o: SvcClientOptions) {
  const headers: Record<string, string> = {};
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  if (o.team) headers['x-svc-team'] = o.team;
  const client = createClient<paths>({ baseUrl: o.server.replace(/\/+$/, ''), headers, fetch: o.fetch });
  client.use({
    async onResponse(res, _options, req) {
      if (res.ok) return undefined;
      const text = await res.clone().text();
      let message = text || res.statusText;
      try {
        message = (JSON.parse(text) as { error?: string }).error ?? message;
      } catch {
        // not JSON: the text itself is the message
      }
      throw new SvcError(res.status, message, req.method, new URL(req.url).pathname);
    },
  });
  return client;
}

export type SvcClient = ReturnType<typeof createSvcClient>;

/** The answer's data (errors were thrown as SvcError already). */
export async function ok<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, response } = await call;
  if (data === undefined)
    throw new SvcError(response.status, 'empty answer', '', new URL(response.url).pathname);
  return data;
}
