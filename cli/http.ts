// The API client: one request per call, bounded by the spec's 5-minute CLI timeout. Every failure
// becomes one line: `cannot reach <server>: <reason>` for the network, `<error>` from the server's
// `{error}` body (with the status where the message alone does not say enough).
import {
  type ApiAnswer,
  type ApiMethod,
  type ApiOptions,
  fillPath,
  type PathOf,
  queryStrings,
} from './api-types.ts';
import { CliError } from './errors.ts';

export const REQUEST_TIMEOUT_MS = 5 * 60 * 1000;

export interface RequestOptions {
  /** JSON body. */
  json?: unknown;
  /** Raw body with its content type. */
  raw?: { data: Uint8Array; type: string };
  /** Streamed body (large uploads), sent with its length. */
  stream?: { body: ReadableStream; type: string; length: number };
  query?: Record<string, string>;
  /** Send the credential (default true). */
  auth?: boolean;
}

export interface Response {
  status: number;
  type: string;
  bytes: Buffer;
}

/** A non-2xx answer; the message is what the user sees after `svc: `. */
export class HttpError extends CliError {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, message: string, body: unknown) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

// Statuses whose server message is generic or names no cause: the number helps.
const SHOW_STATUS = new Set([401, 403, 500, 502, 503, 504]);

function reasonOf(err: unknown): string {
  const e = err as Error & { cause?: Error & { code?: string } };
  if (e?.name === 'TimeoutError') return `no answer within ${REQUEST_TIMEOUT_MS / 60_000} minutes`;
  const cause = e?.cause;
  if (cause?.message) return cause.message;
  if (cause?.code) return cause.code;
  return e?.message ?? String(err);
}

export function errorMessage(status: number, statusText: string, type: string, bytes: Buffer): HttpError {
  let body: unknown;
  let message: string | undefined;
  if (type.includes('json')) {
    try {
      body = JSON.parse(bytes.toString('utf8'));
      const e = (body as { error?: unknown })?.error;
      if (typeof e === 'string' && e) message = e;
    } catch {
      // falls through to the raw text
    }
  }
  if (message === undefined) {
    const text = bytes.toString('utf8').replace(/\s+/g, ' ').trim().slice(0, 200);
    message = `HTTP ${status} ${statusText}${text ? `: ${text}` : ''}`;
  } else if (status === 401) {
    message = `${message} (HTTP 401): the API key was refused; run svc login or check SVC_API_KEY`;
  } else if (SHOW_STATUS.has(status)) {
    message = `${message} (HTTP ${status})`;
  }
  return new HttpError(status, message, body);
}

export class Client {
  readonly server: string;
  readonly #key: string | undefined;

  constructor(server: string, key: string | undefined) {
    this.server = server;
    this.#key = key;
  }

  /** The credential header, for connections made without fetch (a WebSocket). */
  authHeaders(): Record<string, string> {
    return this.#key ? { authorization: `Bearer ${this.#key}` } : {};
  }

  /**
   * A GET whose 2xx body is handed over as it arrives (a file streamed to stdout); any other
   * answer throws like request(). Bounded by the request timeout while nothing arrives: each
   * chunk of the body starts the wait again, so a large file may take as long as it flows.
   */
  async download<P extends PathOf<'get'>>(
    template: P,
    opts: ApiOptions<'get', P>,
  ): Promise<AsyncIterable<Uint8Array>> {
    const o = opts as ApiOptions<'get', P> & {
      path?: Record<string, unknown>;
      query?: Record<string, unknown>;
    };
    const url = new URL(this.server + fillPath(template, o.path));
    for (const [k, v] of Object.entries(queryStrings(o.query))) url.searchParams.set(k, v);
    const ac = new AbortController();
    let timer = setTimeout(() => ac.abort(), REQUEST_TIMEOUT_MS);
    const idle = () => {
      clearTimeout(timer);
      timer = setTimeout(() => ac.abort(), REQUEST_TIMEOUT_MS);
    };
    let res: globalThis.Response;
    try {
      res = await fetch(url, { headers: { accept: '*/*', ...this.authHeaders() }, signal: ac.signal });
    } catch (err) {
      clearTimeout(timer);
      throw new CliError(
        `cannot reach ${this.server}: ${ac.signal.aborted ? reasonOf({ name: 'TimeoutError' }) : reasonOf(err)}`,
      );
    }
    if (res.status < 200 || res.status > 299 || !res.body) {
      const bytes = Buffer.from(await res.arrayBuffer().catch(() => new ArrayBuffer(0)));
      clearTimeout(timer);
      throw errorMessage(res.status, res.statusText, res.headers.get('content-type') ?? '', bytes);
    }
    const body = res.body;
    const server = this.server;
    return {
      async *[Symbol.asyncIterator]() {
        try {
          for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
            idle();
            yield chunk;
          }
        } catch (err) {
          throw new CliError(
            `${server} stopped sending: ${ac.signal.aborted ? reasonOf({ name: 'TimeoutError' }) : reasonOf(err)}`,
          );
        } finally {
          clearTimeout(timer);
        }
      },
    };
  }

  /**
   * Sends a request; a non-2xx answer throws HttpError, a network failure CliError. Untyped: the
   * commands go through send() and call(), which the OpenAPI types.
   */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const url = new URL(this.server + path);
    for (const [k, v] of Object.entries(opts.query ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = {
      accept: 'application/json',
      ...(opts.auth !== false ? this.authHeaders() : {}),
    };
    let body: Uint8Array | string | ReadableStream | undefined;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] = 'application/json';
    } else if (opts.raw) {
      body = opts.raw.data;
      headers['content-type'] = opts.raw.type;
    } else if (opts.stream) {
      body = opts.stream.body;
      headers['content-type'] = opts.stream.type;
      headers['content-length'] = String(opts.stream.length);
    }
    let res: globalThis.Response;
    let bytes: Buffer;
    try {
      res = await fetch(url, {
        method,
        headers,
        body,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        ...(opts.stream ? { duplex: 'half' } : {}),
      } as RequestInit);
      bytes = Buffer.from(await res.arrayBuffer());
    } catch (err) {
      throw new CliError(`cannot reach ${this.server}: ${reasonOf(err)}`);
    }
    const type = res.headers.get('content-type') ?? '';
    if (res.status < 200 || res.status > 299) throw errorMessage(res.status, res.statusText, type, bytes);
    return { status: res.status, type, bytes };
  }

  /**
   * A request typed by the API's OpenAPI (api-types.ts): the path template and method must be a
   * route of the server, and its path parameters, query and body are checked by tsc. The answer is
   * handed over as bytes (a tar archive, a file); call() parses a JSON one.
   */
  async send<M extends ApiMethod, P extends PathOf<M>>(
    method: M,
    template: P,
    opts: ApiOptions<M, P>,
  ): Promise<Response> {
    const o = opts as ApiOptions<M, P> & { path?: Record<string, unknown>; query?: Record<string, unknown> };
    return this.request(method.toUpperCase(), fillPath(template, o.path), {
      query: queryStrings(o.query),
      json: o.json,
      raw: o.raw,
      stream: o.stream,
      auth: o.auth,
    });
  }

  /** send() whose 2xx answer is typed by the OpenAPI; one without a body is undefined. */
  async call<M extends ApiMethod, P extends PathOf<M>>(
    method: M,
    template: P,
    opts: ApiOptions<M, P>,
  ): Promise<ApiAnswer<M, P>> {
    const r = await this.send(method, template, opts);
    if (r.status === 204 || (r.bytes.length === 0 && !r.type.includes('json')))
      return undefined as ApiAnswer<M, P>;
    try {
      return JSON.parse(r.bytes.toString('utf8')) as ApiAnswer<M, P>;
    } catch {
      throw new CliError(
        `${this.server} answered ${method.toUpperCase()} ${template} with something that is not JSON`,
      );
    }
  }
}

/** Encodes one path segment (ids and names come from the user). */
export const seg = (s: string): string => encodeURIComponent(s);
