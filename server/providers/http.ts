// One bounded HTTP call to a provider's API. Every call has a deadline (no call waits unbounded);
// a provider error carries the provider's own message; an unreachable provider says so.
/** Deadline of one provider call (tests shorten it to prove a hung provider fails the phase). */
export const LIMITS = { callMs: 30_000 };
const MAX_ERROR_CHARS = 500;

export class ProviderError extends Error {
  /** The provider's HTTP status; 0 when it could not be reached or did not answer in time. */
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

export interface CallOptions {
  method?: string;
  headers?: Record<string, string>;
  /** JSON body (objects) or raw bytes. */
  body?: unknown;
  timeoutMs?: number;
  /** Statuses that are not errors (e.g. 404 on delete). */
  accept?: number[];
}

/** The provider's own message: E2B `{message}`, Daytona `{message}`, Hetzner `{error: {message}}`. */
export function providerMessage(text: string): string {
  try {
    const j = JSON.parse(text) as { message?: unknown; error?: unknown };
    const e = j.error as { message?: unknown } | string | undefined;
    const m = j.message ?? (typeof e === 'object' && e ? e.message : e);
    if (typeof m === 'string' && m) return m.slice(0, MAX_ERROR_CHARS);
    if (Array.isArray(m)) return m.join('; ').slice(0, MAX_ERROR_CHARS);
  } catch {}
  return text.trim().slice(0, MAX_ERROR_CHARS) || 'no message';
}

/** `<provider>: <what>: <status> <message>`; throws ProviderError; returns the response and its text. */
export async function call(
  provider: string,
  url: string,
  opts: CallOptions = {},
): Promise<{ status: number; text: string; bytes: Buffer; json<T>(): T }> {
  const method = opts.method ?? 'GET';
  const what = `${method} ${new URL(url).pathname}`;
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  let body: Uint8Array<ArrayBuffer> | FormData | string | undefined;
  if (opts.body instanceof Buffer || opts.body instanceof Uint8Array) {
    body = opts.body as Uint8Array<ArrayBuffer>;
    headers['content-type'] ??= 'application/octet-stream';
  } else if (opts.body instanceof FormData) body = opts.body;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const timeoutMs = opts.timeoutMs ?? LIMITS.callMs;
  let res: Response;
  let bytes: Buffer;
  try {
    res = await fetch(url, { method, headers, body, signal: AbortSignal.timeout(timeoutMs) });
    bytes = Buffer.from(await res.arrayBuffer());
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const why =
      e.name === 'TimeoutError'
        ? `no answer within ${Math.round(timeoutMs / 1000)} s`
        : `unreachable (${e.cause?.code ?? e.cause?.message ?? e.message})`;
    throw new ProviderError(`${provider}: ${what}: ${why}`, 0);
  }
  const text = bytes.toString('utf8');
  if (!res.ok && !(opts.accept ?? []).includes(res.status)) {
    throw new ProviderError(`${provider}: ${what}: ${res.status} ${providerMessage(text)}`, res.status);
  }
  return {
    status: res.status,
    text,
    bytes,
    json<T>() {
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new ProviderError(`${provider}: ${what}: answer is not JSON`, res.status);
      }
    },
  };
}

export function joinUrl(base: string, path: string): string {
  return base.replace(/\/+$/, '') + path;
}
