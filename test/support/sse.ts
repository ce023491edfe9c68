// An SSE client for tests: opens GET /v1/events/stream with fetch, parses it with the same parser
// EventSource semantics use, and lets a test wait for what it expects (no timed waits).
import { createParser } from 'eventsource-parser';

export interface Received {
  id: string;
  event: { ID: string; TeamID: string; Subject: string; Kind: string; Body: unknown };
}

/** An open stream: what it has received so far, and a way to wait for more. */
export class Stream {
  events: Received[] = [];
  comments: string[] = [];
  /** Events with an `event:` name (a cut stream's last one). */
  named: { name: string; data: Record<string, unknown> }[] = [];
  status = 0;
  headers = new Headers();
  /** Resolves when the server ends the stream. */
  ended: Promise<void> = Promise.resolve();
  #stop = new AbortController();
  #waiters: (() => void)[] = [];

  async open(url: string, headers: Record<string, string>): Promise<this> {
    const r = await fetch(url, { headers, signal: this.#stop.signal });
    this.status = r.status;
    this.headers = r.headers;
    if (!r.ok || !r.body) {
      await r.text();
      return this;
    }
    const parser = createParser({
      onEvent: (m) =>
        this.#push(() =>
          m.event
            ? this.named.push({ name: m.event, data: JSON.parse(m.data) })
            : this.events.push({ id: m.id ?? '', event: JSON.parse(m.data) }),
        ),
      onComment: (c) => this.#push(() => this.comments.push(c)),
    });
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    this.ended = (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
      } catch {
        // aborted by close()
      }
    })();
    return this;
  }

  #push(fn: () => void): void {
    fn();
    for (const w of this.#waiters.splice(0)) w();
  }

  /** Resolves once `pred` holds (a test timeout, not a timed assertion, bounds the wait). */
  async until(pred: (s: this) => boolean): Promise<void> {
    while (!pred(this)) await new Promise<void>((r) => this.#waiters.push(r));
  }

  close(): void {
    this.#stop.abort();
  }
}
