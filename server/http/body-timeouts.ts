// Bounds on how long a request body may take to arrive. Node's own request timeout covers a
// whole request on every route alike, so it would cut an honest upload on a slow link (10 MiB at
// 64 KiB/s takes 160 s). It is kept only as a backstop at the longest bound (uploadTimeoutMs);
// here every request whose body is still arriving is looked at on one timer: on most routes the
// body must arrive within requestTimeoutMs, and on a route with `config.slowBody` (a streamed
// upload) it is cut after uploadIdleTimeoutMs without a byte, or after uploadTimeoutMs in all.
// A request that has been answered (a refusal that is being drained) is the drain's to bound.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { App } from './app.ts';
import type { HttpLimits } from './limits.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The body is streamed by the handler and may arrive slowly: idle and overall bounds apply. */
    slowBody?: boolean;
  }
}

interface Arriving {
  req: IncomingMessage;
  res: ServerResponse;
  slow: boolean;
  start: number;
  /** Socket bytes read when last looked at, and when they last changed. */
  seen: number;
  movedAt: number;
}

const hasBody = (h: IncomingHttpHeaders) =>
  h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0');

/** What a client is told before the connection is closed, as Node's own timeout does. */
function cut(a: Arriving, message: string): void {
  const socket = a.req.socket;
  if (!socket || socket.destroyed) return;
  if (!a.res.headersSent && socket.writable) {
    const body = JSON.stringify({ error: message });
    socket.write(
      `HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-type: application/json; charset=utf-8\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** The reason to cut `a` now, or null. */
function expired(a: Arriving, limits: HttpLimits, now: number): string | null {
  if (!a.slow)
    return now - a.start > limits.requestTimeoutMs
      ? `the request body did not arrive within ${limits.requestTimeoutMs / 1000} s`
      : null;
  const read = a.req.socket?.bytesRead ?? a.seen;
  if (read !== a.seen) {
    a.seen = read;
    a.movedAt = now;
  }
  if (now - a.movedAt > limits.uploadIdleTimeoutMs)
    return `the upload stalled: no bytes for ${limits.uploadIdleTimeoutMs / 1000} s`;
  if (now - a.start > limits.uploadTimeoutMs)
    return `the upload did not arrive within ${limits.uploadTimeoutMs / 1000} s`;
  return null;
}

export function installBodyTimeouts(app: App, limits: HttpLimits): void {
  const arriving = new Set<Arriving>();
  const every = Math.max(
    50,
    Math.min(1000, Math.floor(Math.min(limits.requestTimeoutMs, limits.uploadIdleTimeoutMs) / 4)),
  );
  let timer: NodeJS.Timeout | null = null;
  const sweep = () => {
    const now = Date.now();
    for (const a of arriving) {
      // A throw here would leave the timer's callback and end the process: each request alone.
      try {
        if (a.req.complete || a.req.destroyed || a.res.headersSent) {
          arriving.delete(a);
          continue;
        }
        const why = expired(a, limits, now);
        if (why === null) continue;
        arriving.delete(a);
        cut(a, why);
      } catch (err) {
        arriving.delete(a);
        app.log.warn({ err: (err as Error).message }, 'body timeout check failed');
      }
    }
    if (arriving.size === 0 && timer) {
      clearInterval(timer);
      timer = null;
    }
  };
  app.addHook('onRequest', (req, _reply, done) => {
    const raw = req.raw;
    if (raw.complete || !hasBody(raw.headers)) return done();
    const now = Date.now();
    const seen = raw.socket?.bytesRead ?? 0;
    arriving.add({
      req: raw,
      res: _reply.raw,
      slow: req.routeOptions.config?.slowBody === true,
      start: now,
      seen,
      movedAt: now,
    });
    if (!timer) {
      timer = setInterval(sweep, every);
      timer.unref();
    }
    done();
  });
  app.addHook('onClose', (_app, done) => {
    if (timer) clearInterval(timer);
    timer = null;
    arriving.clear();
    done();
  });
}
