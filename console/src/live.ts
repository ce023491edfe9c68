// Live updates: GET /v1/events/stream read with fetch (EventSource cannot send the Authorization
// header, and the token stays out of URLs). Reconnects after a drop with Last-Event-ID, so no
// event is missed; `onOpen` runs on every (re)connect so a page re-reads what it shows.
import { createParser } from 'eventsource-parser';
import { useEffect, useRef } from 'preact/hooks';
import { authHeaders, type Event } from './api.ts';

export interface LiveHandlers {
  onEvent: (e: Event) => void;
  onOpen?: () => void;
}

/** Follows the team's events (of one subject, or all); returns the function that stops it. */
export function follow(subject: string | undefined, h: LiveHandlers): () => void {
  const stop = new AbortController();
  let lastId = '';
  let retryMs = 3000;
  const run = async () => {
    while (!stop.signal.aborted) {
      try {
        const headers = authHeaders();
        if (lastId) headers['last-event-id'] = lastId;
        const q = subject ? `?subject=${encodeURIComponent(subject)}` : '';
        const r = await fetch(`/v1/events/stream${q}`, {
          headers,
          signal: stop.signal,
          credentials: 'omit',
          cache: 'no-store',
        });
        if (r.status === 401 || r.status === 403 || r.status === 400) return;
        if (r.ok && r.body) {
          h.onOpen?.();
          const parser = createParser({
            onEvent: (m) => {
              if (m.id) lastId = m.id;
              try {
                h.onEvent(JSON.parse(m.data) as Event);
              } catch {
                // a malformed line is skipped, the stream goes on
              }
            },
            onRetry: (ms) => {
              retryMs = Math.min(Math.max(ms, 500), 30_000);
            },
          });
          const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            parser.feed(value);
          }
        }
      } catch {
        if (stop.signal.aborted) return;
      }
      await new Promise((res) => setTimeout(res, retryMs));
    }
  };
  void run();
  return () => stop.abort();
}

/** A page's live subscription for as long as it is shown; handlers may change between renders. */
export function useLive(subject: string | undefined, h: LiveHandlers): void {
  const ref = useRef(h);
  ref.current = h;
  useEffect(
    () =>
      follow(subject, {
        onEvent: (e) => ref.current.onEvent(e),
        onOpen: () => ref.current.onOpen?.(),
      }),
    [subject],
  );
}
