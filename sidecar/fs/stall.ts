// A file transfer between svcd and the control plane can take long (up to the file cap), so it has
// no total deadline; what it must not do is stall: a peer that stops reading or sending would hold
// a transfer slot (MAX_TRANSFERS) and the container's archive stream for ever. The watch aborts the
// request and fails the stream once no byte has moved for `idleMs`, including before the first.
import { Transform } from 'node:stream';
import { guard } from '../../shared/faults.ts';

/** How long a file transfer may move no byte before it is abandoned. */
export const TRANSFER_IDLE_MS = 60_000;

export interface StallWatch {
  /** Pipe the bytes through it: each chunk restarts the clock. */
  stream: Transform;
  /** For the request carrying the bytes: aborted when the transfer stalls. */
  signal: AbortSignal;
}

export function stallWatch(what: string, idleMs = TRANSFER_IDLE_MS): StallWatch {
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const stream: Transform = new Transform({
    transform(chunk: Buffer, _enc, done) {
      arm();
      done(null, chunk);
    },
    flush(done) {
      clearTimeout(timer);
      done();
    },
  });
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(
      guard('fs transfer: stall watch', () => {
        const err = new Error(`${what}: no byte moved for ${Math.round(idleMs / 1000)} s; abandoned`);
        abort.abort(err);
        stream.destroy(err);
      }),
      idleMs,
    );
    timer.unref();
  };
  stream.once('close', () => clearTimeout(timer));
  // The stall can come before the stream is piped anywhere (while the request waits for its
  // answer); an 'error' with no listener would end svcd. Whoever pipes it sees the error too.
  stream.on('error', () => {});
  arm();
  return { stream, signal: abort.signal };
}
