// Clients of the live-process routes for the e2e suites: a Server-Sent Events reader and a
// WebSocket follower, both collecting the stream's events in order.
import assert from 'node:assert/strict';
import { WebSocket } from 'ws';
import type { ProcessStreamEventBody } from '../../protocol/api.ts';
import type { TestServer } from '../support/server.ts';

export type StreamEvent = ProcessStreamEventBody;

/** Waiting for an event: resolves once `match` holds for the events so far (checked on each new one). */
class Collected {
  events: StreamEvent[] = [];
  done = false;
  #waiters: { match: (all: StreamEvent[]) => boolean; resolve: () => void; reject: (e: Error) => void }[] =
    [];

  /** Output bytes seen and the highest seq seen (output or gap). */
  bytes = 0;
  maxSeq = 0;
  gaps = 0;
  /** False: output events are counted, their data not kept (a flood). */
  keepData = true;

  push(e: StreamEvent): void {
    if (e.type === 'stdout' || e.type === 'stderr') {
      this.bytes += Buffer.byteLength(e.data, 'base64');
      this.maxSeq = Math.max(this.maxSeq, e.seq);
      if (!this.keepData) e = { ...e, data: '' };
    } else if (e.type === 'gap') {
      this.gaps++;
      this.maxSeq = Math.max(this.maxSeq, e.to);
    }
    this.events.push(e);
    this.#check();
  }
  finish(): void {
    this.done = true;
    this.#check();
  }
  #check(): void {
    for (const w of [...this.#waiters]) {
      if (w.match(this.events)) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve();
      } else if (this.done) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.reject(new Error(`stream ended first; events: ${describe(this.events)}`));
      }
    }
  }
  until(match: (all: StreamEvent[]) => boolean): Promise<StreamEvent[]> {
    return new Promise((resolve, reject) => {
      this.#waiters.push({ match, resolve: () => resolve(this.events), reject });
      this.#check();
    });
  }
  /** Everything the stream said on stdout and stderr, decoded. */
  text(): string {
    return this.events
      .filter((e) => e.type === 'stdout' || e.type === 'stderr')
      .map((e) => Buffer.from((e as { data: string }).data, 'base64').toString('utf8'))
      .join('');
  }
  end(): Extract<StreamEvent, { type: 'end' }> | undefined {
    return this.events.find((e) => e.type === 'end') as Extract<StreamEvent, { type: 'end' }> | undefined;
  }
}

export const hasText = (phrase: string) => (all: StreamEvent[]) => textOf(all).includes(phrase);
export const ended = (all: StreamEvent[]) => all.some((e) => e.type === 'end');

export function textOf(all: StreamEvent[]): string {
  return all
    .filter((e) => e.type === 'stdout' || e.type === 'stderr')
    .map((e) => Buffer.from((e as { data: string }).data, 'base64').toString('utf8'))
    .join('');
}

function describe(events: StreamEvent[]): string {
  const s = JSON.stringify(events.filter((e) => e.type !== 'stdout' && e.type !== 'stderr'));
  return `${s.slice(0, 500)} text: ${textOf(events).slice(-500)}`;
}

export interface SseStream extends Collected {}
export type SseFollower = Collected & {
  abort(): void;
  status: number;
  error?: string;
  /** Starts reading the body (at once unless `read: false` was given). */
  read(): void;
};

/**
 * Follows a process by SSE. With `read: false` the body is never read (a slow client): the
 * returned follower only says whether the server accepted it.
 */
export async function followSse(
  t: TestServer,
  env: string,
  pid: string,
  o: { since?: number; token?: string; read?: boolean; keepData?: boolean } = {},
): Promise<SseFollower> {
  const ac = new AbortController();
  const q = o.since === undefined ? '' : `?since=${o.since}`;
  const r = await fetch(`${t.url}/v1/envs/${env}/processes/${pid}/stream${q}`, {
    headers: { authorization: `Bearer ${o.token ?? t.key}`, accept: 'text/event-stream' },
    signal: ac.signal,
  });
  let reading = false;
  const c = Object.assign(new Collected(), {
    abort: () => ac.abort(),
    status: r.status,
    read: () => {
      if (reading || r.status !== 200) return;
      reading = true;
      void consume(r, c);
    },
  }) as SseFollower;
  c.keepData = o.keepData !== false;
  if (r.status !== 200) {
    c.error = await r.text();
    c.push({ type: 'error', error: `HTTP ${r.status}: ${c.error}` });
    c.finish();
    return c;
  }
  if (o.read !== false) c.read();
  return c;
}

async function consume(r: Response, c: Collected): Promise<void> {
  let buf = '';
  try {
    for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
      buf += Buffer.from(chunk).toString('utf8');
      for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        for (const line of block.split('\n'))
          if (line.startsWith('data: ')) c.push(JSON.parse(line.slice(6)) as StreamEvent);
      }
    }
  } catch {}
  c.finish();
}

export type WsFollower = Collected & { ws: WebSocket; send(msg: object): void; closed: Promise<number> };

/** Follows a process over a WebSocket; rejects with the HTTP status when the upgrade is refused. */
export function followWs(
  t: TestServer,
  env: string,
  pid: string,
  o: { token?: string } = {},
): Promise<WsFollower> {
  const url = `${t.url.replace(/^http/, 'ws')}/v1/envs/${env}/processes/${pid}/stream`;
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${o.token ?? t.key}` } });
  const c = Object.assign(new Collected(), {
    ws,
    send: (msg: object) => ws.send(JSON.stringify(msg)),
  }) as WsFollower;
  c.closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  ws.on('message', (data) => c.push(JSON.parse(data.toString()) as StreamEvent));
  ws.on('close', () => c.finish());
  return new Promise((resolve, reject) => {
    ws.on('open', () => resolve(c));
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.on('error', (err) => reject(err));
  });
}

/** Starts a process; returns its pid. */
export async function start(t: TestServer, env: string, body: object): Promise<string> {
  const r = await t.req('POST', `/v1/envs/${env}/processes`, { body });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  assert.equal(typeof r.body.pid, 'string');
  return r.body.pid as string;
}

export const b64 = (s: string) => Buffer.from(s).toString('base64');
