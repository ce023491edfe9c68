// Held connections for the soak: requests that never finish (half-sent headers, bodies declared
// and never sent) and event streams that never read. The server must cut the first at its
// timeouts or refuse them at once, and bound what it buffers for the second.
import { connect, type Socket } from 'node:net';
import { HOSTILE_ADDRESS, KEYED_HOSTILE_ADDRESS } from './http.ts';
import type { Recorder } from './record.ts';

/** Held requests: half-sent headers, and bodies declared but never sent (an upload, a webhook). */
const SLOW: ((key: string) => [string, string, string])[] = [
  () => ['h.slow.headers', HOSTILE_ADDRESS, 'GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: '],
  (key) => [
    'h.slow.upload',
    KEYED_HOSTILE_ADDRESS,
    `PUT /v1/uploads HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/gzip\r\nContent-Length: 10000000\r\n\r\n\x1f\x8b`,
  ],
  () => [
    'h.slow.webhook',
    HOSTILE_ADDRESS,
    'POST /webhooks/codehost HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\nContent-Length: 2000000\r\n\r\n{"a":"',
  ],
];

/**
 * Held connections in the background (SLOW): cut at the header or request timeout, or refused
 * at once (a 4xx, 429 at a rate limit). A socket still open after `boundMs` is unexpected.
 */
export function slowRequests(
  url: string,
  key: string,
  rec: Recorder,
  n: number,
  pending: Set<Promise<void>>,
  boundMs = 180_000,
) {
  const { hostname, port } = new URL(url);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const [op, from, first] = SLOW[i % SLOW.length](key);
    const p = new Promise<void>((resolve) => {
      let got = '';
      const sock = connect({ host: hostname, port: Number(port), localAddress: from }, () =>
        sock.write(first),
      );
      const timer = setTimeout(() => {
        sock.destroy();
        rec.note(
          op,
          'hostile',
          'unexpected-timeout',
          performance.now() - t0,
          `still open after ${boundMs} ms`,
        );
        resolve();
      }, boundMs);
      sock.on('data', (d) => {
        got += d.toString('latin1');
      });
      sock.on('error', () => {});
      sock.on('close', () => {
        clearTimeout(timer);
        if (performance.now() - t0 >= boundMs) return;
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0);
        const ok = status === 0 || (status >= 400 && status < 500);
        rec.note(
          op,
          'hostile',
          status >= 500 ? 'unexpected-5xx' : ok ? 'expected' : 'unexpected-other',
          performance.now() - t0,
          `${status || 'closed'} ${got.slice(0, 120)}`,
        );
        resolve();
      });
    });
    pending.add(p);
    void p.then(() => pending.delete(p));
  }
}

/** Event streams that never read, held `holdMs`: 200, or a 429/503 at a cap. */
export async function quietStreams(url: string, key: string, rec: Recorder, n: number, holdMs: number) {
  const { hostname, port } = new URL(url);
  const held: Socket[] = [];
  const socks = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<{ status: number; ms: number }>((resolve) => {
          const t0 = performance.now();
          const sock = connect({ host: hostname, port: Number(port), localAddress: KEYED_HOSTILE_ADDRESS });
          let head = '';
          const done = (status: number) => {
            sock.pause(); // never read again: the server's buffer for this stream only grows
            resolve({ status, ms: performance.now() - t0 });
          };
          sock.on('error', () => done(0));
          sock.once('connect', () =>
            sock.write(`GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`),
          );
          const onData = (d: Buffer) => {
            head += d.toString('latin1');
            if (!head.includes('\r\n')) return;
            sock.off('data', onData);
            done(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0));
          };
          sock.on('data', onData);
          setTimeout(() => done(0), 30_000).unref();
          held.push(sock);
        }),
    ),
  );
  for (const s of socks)
    rec.add(
      'h.sse.flood',
      'hostile',
      { status: s.status, body: null, text: '', ms: s.ms, error: s.status ? null : 'no answer' },
      (a) => a.status === 200 || a.status === 429 || a.status === 503,
    );
  await new Promise((r) => setTimeout(r, holdMs));
  for (const s of held.splice(0)) s.destroy();
}
