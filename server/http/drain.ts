// Answer, then drain: a request can be answered before its body was read: a 413 over the route's
// limit, a body that cannot be parsed (Fastify then marks the answer `Connection: close`), or a
// refusal before parsing (401 for a bad key, 404 for an unknown route). Node then destroys the
// socket as soon as the answer is flushed when either side asked to close. A client still writing
// its body writes into a closed socket: the kernel answers with a reset, which can discard the
// answer before the client has read it (measured with plain Node clients sending 32 MiB + 64 KiB:
// 11 of 20 never saw their 413, 12 of 20 never saw their 401). Spec "Errors": the client must
// receive the answer.
// Instead, as production servers do, the answer goes out and the rest of the body is read and
// discarded, bounded in bytes and time; past either bound the connection is cut. The connection
// then stays usable: its body has been read to the end, unless the client asked to close it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { guard } from '../../shared/faults.ts';
import type { App } from './app.ts';

export interface DrainBounds {
  /** Bytes of a refused body read and discarded before the connection is cut. */
  drainMaxBytes: number;
  /** Longest a refused body is read (nginx's `lingering_time`). */
  drainMaxMs: number;
}

function drain(req: IncomingMessage, res: ServerResponse, bounds: DrainBounds): void {
  // A handler that destroyed the body stream (past a limit of its own) has left the request
  // without its socket: the answer's socket is the connection.
  const socket = req.socket ?? res.socket;
  if (!socket || socket.destroyed) return;
  const cut = guard('http drain: cut', () => socket.destroy());
  const timer = setTimeout(cut, bounds.drainMaxMs);
  timer.unref();
  let read = 0;
  const count = (chunk: Buffer) => {
    read += chunk.length;
    if (read > bounds.drainMaxBytes) cut();
  };
  const stop = () => {
    clearTimeout(timer);
    req.off('data', count);
    socket.off('close', stop);
  };
  socket.once('close', stop);
  // Nothing of that body can be read any more: the client has the time bound to read its answer.
  if (req.destroyed) return;
  // What Node would have done without the drain: the client sent `Connection: close` (or spoke
  // HTTP/1.0 without keep-alive).
  const clientCloses = !res.shouldKeepAlive;
  // The body is read to its end: now the client's `Connection: close` can be honoured without a
  // reset (our end of the connection closes once the answer has been written).
  const ended = guard('http drain: end', () => {
    stop();
    if (!clientCloses || socket.destroyed) return;
    const close = () => socket.end(() => socket.destroy());
    if (res.writableFinished) close();
    else res.once('finish', guard('http drain: close', close));
  });
  // Read from now on, so Node does not dump the body where the bound could not see it.
  req.on('data', count);
  req.once('end', ended);
  req.resume();
  // Without this, a client that sent `Connection: close` has its socket destroyed after the
  // answer with the body unread: the very reset this avoids. The body is read to its end first.
  res.shouldKeepAlive = true;
}

/** Installs answer-then-drain for every route; call before routes are registered. */
export function installDrainOnRefusal(app: App, bounds: DrainBounds): void {
  // An answer can pass onSend twice (an error while sending is answered again): one drain each.
  const draining = new WeakSet<ServerResponse>();
  app.addHook('onSend', (req, reply, payload, done) => {
    // `complete` is true once the whole body has arrived (at once for requests without one).
    if (reply.statusCode >= 400 && !req.raw.complete && !reply.raw.headersSent) {
      if (reply.getHeader('connection') === 'close') reply.removeHeader('connection');
      if (!draining.has(reply.raw)) drain(req.raw, reply.raw, bounds);
      draining.add(reply.raw);
    }
    done(null, payload);
  });
}
