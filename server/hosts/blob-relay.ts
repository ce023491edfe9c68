// A blob's bytes live in the replica that parked them (a buffer, a file being streamed, a client's
// request body, a reader waiting for a host's upload), while the host's request for it may reach
// any replica behind the balancer. A replica that finds the token in the database but not the
// blob in its memory hands the request to the holder, directly (SVC_REPLICA_URL), marked as relayed
// so that it is never passed on again. The token is checked here first (by hash, constant time) and
// again by the holder; the holder's answer, status and body, goes back as it arrives.
import { Readable } from 'node:stream';
import { Upstream } from '../errors.ts';

/** The header of a relayed request: a replica answers it only from its own memory. */
export const RELAYED = 'x-svc-blob-relayed';
/** The holder must start answering within this long (a download's bytes may take longer). */
export const RELAY_HEADERS_MS = 30_000;

export interface Relayed {
  status: number;
  headers: Headers;
  body: Readable | null;
}

/**
 * Sends the request to the holder and gives its answer once its headers arrived; `cut` aborts it
 * (the host went away). 502 when the holder cannot be reached or does not answer in time.
 */
export async function relay(
  url: string,
  init: { method: 'GET' | 'PUT'; authorization: string; body?: Buffer | Readable; length?: string },
  cut: AbortSignal,
): Promise<Relayed> {
  const ctrl = new AbortController();
  const onCut = () => ctrl.abort();
  cut.addEventListener('abort', onCut, { once: true });
  const timer = setTimeout(() => ctrl.abort(), RELAY_HEADERS_MS);
  const headers: Record<string, string> = { authorization: init.authorization, [RELAYED]: '1' };
  if (init.body) headers['content-type'] = 'application/octet-stream';
  if (init.length !== undefined) headers['content-length'] = init.length;
  try {
    const r = await fetch(url, {
      method: init.method,
      headers,
      body: init.body instanceof Readable ? (Readable.toWeb(init.body) as ReadableStream) : init.body,
      signal: ctrl.signal,
      // A request body that is a stream must say so (Node's fetch).
      ...(init.body instanceof Readable ? { duplex: 'half' } : {}),
    } as RequestInit);
    clearTimeout(timer);
    const body = r.body ? Readable.fromWeb(r.body as import('node:stream/web').ReadableStream) : null;
    // A stream error after the answer started (the holder went away) ends the answer; it is
    // handled by whoever consumes the body, and must not go unhandled here.
    body?.on('error', () => {});
    return { status: r.status, headers: r.headers, body };
  } catch (err) {
    clearTimeout(timer);
    throw new Upstream(
      `the control-plane replica holding this blob did not answer: ${(err as Error).message}`,
    );
  } finally {
    cut.removeEventListener('abort', onCut);
  }
}
