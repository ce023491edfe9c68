// One client following a live process (an SSE response or a WebSocket): output in order, a `gap`
// for what was lost (on the host, on the way, or because this client reads too slowly), one `end`.
// A client whose unsent output passes MAX_CLIENT_BUFFER gets gaps instead of more memory; the
// process and the other clients never wait for it. Its gap is told as soon as it read what was
// queued (the transport calls `drained`), not only with the next output: a process that went
// quiet after a flood still shows the client where its output went missing.
import type { ProcessEnd } from '../../protocol/processes.ts';

/** Unsent bytes a client may hold before its output turns into a gap. */
export const MAX_CLIENT_BUFFER = 4 * 1024 * 1024;

export abstract class FollowerSink {
  #gap: { from: number; to: number } | null = null;
  #ended = false;
  /** Set by whoever registered the sink: called once when the client goes away or the stream ends. */
  onClose: () => void = () => {};

  get ended(): boolean {
    return this.#ended;
  }

  /** Bytes written and not yet sent to the client. */
  protected abstract buffered(): number;
  /** Sends one event (its JSON text). */
  protected abstract send(json: string): void;
  /** Ends the transport after the last event. */
  protected abstract finish(): void;

  output(kind: 'stdout' | 'stderr', seq: number, data: Buffer): void {
    if (this.#ended) return;
    if (this.buffered() > MAX_CLIENT_BUFFER) {
      this.gap(seq, seq);
      return;
    }
    this.#flushGap();
    this.send(`{"type":"${kind}","seq":${seq},"data":"${data.toString('base64')}"}`);
  }

  gap(from: number, to: number): void {
    if (this.#ended) return;
    const g = this.#gap;
    if (g && from <= g.to + 1) g.to = Math.max(g.to, to);
    else {
      this.#flushGap();
      this.#gap = { from, to };
    }
    if (this.buffered() <= MAX_CLIENT_BUFFER) this.#flushGap();
  }

  /** The transport wrote out what was queued: a pending gap goes now, if the client keeps up again. */
  protected drained(): void {
    if (!this.#ended && this.#gap && this.buffered() <= MAX_CLIENT_BUFFER) this.#flushGap();
  }

  end(e: ProcessEnd): void {
    if (this.#ended) return;
    this.#flushGap();
    this.send(JSON.stringify({ type: 'end', ...e }));
    this.close();
  }

  /** Ends without an event (the client went away, or an `end` was sent). Idempotent. */
  close(): void {
    if (this.#ended) return;
    this.#ended = true;
    try {
      this.finish();
    } finally {
      this.onClose();
    }
  }

  #flushGap(): void {
    const g = this.#gap;
    if (!g) return;
    this.#gap = null;
    this.send(`{"type":"gap","from":${g.from},"to":${g.to}}`);
  }
}
