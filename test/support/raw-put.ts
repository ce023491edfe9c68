// A PUT written over a bare socket, the whole body whatever the server answers meanwhile: what a
// client that does not read while it writes does. Tests of answer-then-drain use it to see every
// status line on the connection and whether the server reset it.
import { connect } from 'node:net';

export const MiB = 1024 * 1024;

export interface RawOutcome {
  /** The first status on the connection. */
  status: number | null;
  /** Every status line read on the connection, in order. */
  statuses: number[];
  /** Everything after the first answer's headers. */
  body: string;
  written: number;
  error: string | null;
}

export interface RawPutOptions {
  /** Bearer credential; none when absent. */
  key?: string;
  /** `transfer-encoding: chunked` instead of a declared length. */
  chunked?: boolean;
  /** Extra request header lines, e.g. `connection: close`. */
  headers?: string[];
  /**
   * After the whole body: with `next`, awaits `next()` and then asks the same connection for
   * `GET /health` (it must still be usable when the refused body was read to its end; the server
   * closes it after that). Without it: wait for the answer, then close.
   */
  next?: () => Promise<void>;
}

/** PUTs `size` bytes (1 MiB per write) to `url + path`, then reads the connection to its end. */
export function rawPut(
  url: string,
  path: string,
  size: number,
  opts: RawPutOptions = {},
): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const out: RawOutcome = { status: null, statuses: [], body: '', written: 0, error: null };
    const got: Buffer[] = [];
    const sock = connect(Number(u.port), u.hostname);
    const finish = () => {
      const text = Buffer.concat(got).toString();
      out.statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      out.status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]) || null;
      const at = text.indexOf('\r\n\r\n');
      out.body = at < 0 ? '' : text.slice(at + 4);
      resolve(out);
    };
    sock.on('data', (c) => got.push(c));
    sock.on('error', (err: NodeJS.ErrnoException) => {
      out.error ??= err.code ?? err.message;
    });
    sock.on('close', finish);
    const send = (data: string | Buffer) =>
      sock.write(data) ? Promise.resolve() : new Promise<void>((r) => sock.once('drain', r));
    const piece = Buffer.alloc(MiB, 0x61);
    void (async () => {
      await new Promise<void>((r) => sock.once('connect', r));
      const head = [
        `PUT ${path} HTTP/1.1`,
        `host: ${u.host}`,
        ...(opts.key ? [`authorization: Bearer ${opts.key}`] : []),
        'content-type: application/x-tar',
        opts.chunked ? 'transfer-encoding: chunked' : `content-length: ${size}`,
        ...(opts.headers ?? []),
      ];
      await send(`${head.join('\r\n')}\r\n\r\n`);
      let left = size;
      while (left > 0 && !sock.destroyed) {
        const part = left >= MiB ? piece : piece.subarray(0, left);
        await send(
          opts.chunked
            ? Buffer.concat([Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n')])
            : part,
        );
        out.written += part.length;
        left -= part.length;
      }
      if (opts.chunked && !sock.destroyed) await send('0\r\n\r\n');
      if (sock.destroyed) return;
      if (opts.next) {
        await opts.next();
        if (!sock.destroyed)
          sock.write(`GET /health HTTP/1.1\r\nhost: ${u.host}\r\nconnection: close\r\n\r\n`);
      } else setTimeout(() => sock.end(), 200);
    })();
  });
}
