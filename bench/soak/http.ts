// The soak's HTTP client: node:http rather than fetch, so each request has a bound on its whole
// time, a source address of its own (hostile traffic comes from other loopback addresses: the
// server limits failed authentications per client address, and neither the honest load nor the
// keyed hostile input may be locked out by the floods of bad keys), and no connection reuse that would let a hostile request's
// connection state leak into the next one. An answer is never thrown: a network failure or a
// timeout is an outcome with `status` 0 and an `error` class.
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { requestParts } from '../../test/support/server.ts';

export interface Answer {
  /** HTTP status, or 0 when no answer arrived. */
  status: number;
  body: any;
  text: string;
  ms: number;
  /** `timeout`, or the socket's error code (ECONNRESET, EPIPE...), when there was no full answer. */
  error: string | null;
}

export interface CallOpts {
  body?: unknown;
  raw?: string | Buffer;
  /** A credential to send instead of the client's own; false sends none. */
  token?: string | false;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

export interface Client {
  url: string;
  key: string;
  call(method: string, path: string, opts?: CallOpts): Promise<Answer>;
  /** The same shape as the test servers' `req` (test/support), so their helpers take this client. */
  req(
    method: string,
    path: string,
    opts?: CallOpts,
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

export const DEFAULT_TIMEOUT_MS = 120_000;

/** Hostile traffic without a valid credential comes from here: floods of bad keys lock it out. */
export const HOSTILE_ADDRESS = '127.0.0.2';
/** Hostile traffic with the team's key comes from here, so the lock-out above does not hide it. */
export const KEYED_HOSTILE_ADDRESS = '127.0.0.3';

export function client(url: string, key: string, localAddress = '127.0.0.1'): Client {
  const { hostname, port } = new URL(url);
  const call = (method: string, path: string, o: CallOpts = {}): Promise<Answer> => {
    const { headers, body } = requestParts(key, o);
    if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
    const t0 = performance.now();
    return new Promise((resolve) => {
      let settled = false;
      const done = (status: number, text: string, error: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {}
        resolve({ status, body: parsed, text, ms: performance.now() - t0, error });
      };
      const req = request({ hostname, port, method, path, headers, agent: false, localAddress }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), null));
        res.on('error', (err: NodeJS.ErrnoException) =>
          done(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'), err.code ?? err.message),
        );
      });
      const timer = setTimeout(() => {
        req.destroy();
        done(0, '', 'timeout');
      }, o.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      req.on('error', (err: NodeJS.ErrnoException) => done(0, '', err.code ?? err.message));
      req.end(body);
    });
  };
  return {
    url,
    key,
    call,
    async req(method, path, opts) {
      const a = await call(method, path, opts);
      return { status: a.status, body: a.body, headers: new Headers() };
    },
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
