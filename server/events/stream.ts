// GET /v1/events/stream: the events of /v1/events as Server-Sent Events, live (spec "Events",
// extended). Same credential and `?subject=` filter, only the caller's team. Each event is one
// `id:` + `data:` (the event record as JSON, so no field of it can break the framing); a comment
// line every `heartbeatMs` keeps proxies from closing an idle stream; `Last-Event-ID` (header, as
// EventSource sends it on reconnect) resumes after that event with nothing lost or repeated.
//
// A stream follows its team's feed (bus.ts: one reader per team, whatever the number of
// streams). A stream that falls more than MAX_BUFFERED behind is cut: its last event is
// `event: lagged` with `{error, last_event_id}`, and its connection is closed once that is
// taken or after `cutGraceMs`; the client resumes with Last-Event-ID.
import { PassThrough } from 'node:stream';
import { Type } from '@sinclair/typebox';
import { idFloor, PREFIX } from '../../protocol/ids.ts';
import type { AppContext } from '../context.ts';
import type { Db } from '../db/types.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import type { Authenticator } from '../identity/auth.ts';
import { type EventBus, type Follower, frameOf, type LiveFrame, STREAM_TIMING } from './bus.ts';
import { checkSubject } from './routes.ts';
import { eventsAfter } from './store.ts';

export { STREAM_TIMING } from './bus.ts';

/** Rows per read while a resuming stream catches up. */
const PAGE = 100;
/** Unsent bytes a stream may hold; past it the stream is cut (its client resumes). */
export const MAX_BUFFERED = 256 * 1024;
/** The SSE event name of a cut stream's last event. */
export const LAGGED_EVENT = 'lagged';
const EVENT_ID_RE = /^evt_[0-9a-z]{22}$/;

interface StreamOptions {
  db: Db;
  bus: EventBus;
  auth: Authenticator;
  teamId: string;
  subject: string | undefined;
  /** Re-checked on every heartbeat: a revoked key or a lost membership ends the stream. */
  credential: { authorization: string | undefined; team: string | undefined };
  /** Highest id the client has; '' for "from now on". */
  after: string;
  /** Closes the connection at once (a cut stream whose client takes nothing). */
  drop: () => void;
}

export class LiveStream implements Follower {
  readonly out = new PassThrough();
  readonly teamId: string;
  /** The most unsent bytes this stream has held (tests check the bound). */
  peakBuffered = 0;
  #o: StreamOptions;
  /** Live frames that arrive while a resuming stream reads what it missed. */
  #pending: LiveFrame[] | null = [];
  #pendingBytes = 0;
  /** Ids written while catching up that the feed may still offer (a late row). */
  #caughtUp = new Set<string>();
  #lastId: string;
  #leave: () => void = () => {};
  #timers: NodeJS.Timeout[] = [];
  #closed = false;

  constructor(o: StreamOptions) {
    this.#o = o;
    this.teamId = o.teamId;
    this.#lastId = o.after;
    // A stream error must not become an uncaught one: the stream just ends.
    this.out.on('error', () => this.close());
  }

  /** Joins the team's feed: 503/429 past the limits (bus.ts). */
  async open(): Promise<void> {
    const leave = await this.#o.bus.join(this);
    // A client gone while the feed started has already closed this stream.
    if (this.#closed) return leave();
    this.#leave = leave;
    this.out.write('retry: 3000\n: connected\n\n');
    this.#timers.push(setInterval(() => void this.#heartbeat(), STREAM_TIMING.heartbeatMs));
  }

  /** Writes what the client missed (Last-Event-ID), then what arrived meanwhile, then goes live. */
  async catchUp(): Promise<void> {
    try {
      for (let after = this.#o.after; after && !this.#closed; ) {
        const rows = await eventsAfter(this.#o.db, this.teamId, this.#o.subject, after, PAGE);
        // Only ids the feed may still offer (its look-back window) need remembering.
        const floor = idFloor(PREFIX.event, Date.now() - STREAM_TIMING.lookbackMs);
        for (const e of rows) {
          if (e.ID >= floor) this.#caughtUp.add(e.ID);
          if (!this.#write(frameOf(e))) return;
        }
        if (rows.length < PAGE) break;
        after = rows[rows.length - 1].ID;
        if (this.out.writableNeedDrain && !(await this.#drained())) return this.#cut();
      }
    } catch {
      return this.close();
    }
    const pending = this.#pending ?? [];
    this.#pending = null;
    for (const f of pending) this.deliver(f);
  }

  deliver(f: LiveFrame): void {
    if (this.#closed || (this.#o.subject && f.subject !== this.#o.subject)) return;
    if (this.#pending) {
      this.#pending.push(f);
      this.#pendingBytes += f.bytes.length;
      if (this.#pendingBytes > MAX_BUFFERED) this.#cut();
      return;
    }
    // The feed offers an id once; only a row this stream read itself can come again.
    if (this.#caughtUp.size > 0 && this.#caughtUp.delete(f.id)) return;
    this.#write(f);
  }

  /** False (and the stream cut) when the frame would pass the buffer bound. */
  #write(f: LiveFrame): boolean {
    if (this.#closed) return false;
    if (this.out.writableLength + f.bytes.length > MAX_BUFFERED) {
      this.#cut();
      return false;
    }
    this.out.write(f.bytes);
    this.#lastId = f.id;
    this.peakBuffered = Math.max(this.peakBuffered, this.out.writableLength);
    return true;
  }

  #drained(): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.out.off('drain', onDrain);
        this.out.off('close', onClose);
        resolve(ok && !this.#closed);
      };
      const onDrain = () => done(true);
      const onClose = () => done(false);
      const timer = setTimeout(() => done(false), STREAM_TIMING.cutGraceMs);
      this.out.once('drain', onDrain);
      this.out.once('close', onClose);
    });
  }

  /** The stream fell behind: one last event says so and where to resume; then it ends. */
  #cut(): void {
    if (this.#closed) return;
    const data = JSON.stringify({
      error: `this stream fell more than ${MAX_BUFFERED} bytes behind and was closed; reconnect with Last-Event-ID to resume`,
      last_event_id: this.#lastId,
    });
    this.out.write(`event: ${LAGGED_EVENT}\ndata: ${data}\n\n`);
    this.close();
    // What it holds is freed when the client takes it, or when the grace runs out.
    const timer = setTimeout(() => this.#o.drop(), STREAM_TIMING.cutGraceMs);
    timer.unref();
    this.out.once('close', () => clearTimeout(timer));
  }

  async #heartbeat(): Promise<void> {
    const { authorization, team } = this.#o.credential;
    try {
      const caller = await this.#o.auth.authenticate(authorization, team, 'key');
      if (caller.teamId !== this.teamId) throw new Error('team changed');
    } catch {
      return this.close();
    }
    if (!this.#closed && this.out.writableLength < MAX_BUFFERED) {
      this.out.write(`: heartbeat ${new Date().toISOString()}\n\n`);
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pending = null;
    this.#leave();
    for (const t of this.#timers) clearInterval(t);
    this.out.end();
  }
}

export function eventStreamRoutes(app: App, ctx: AppContext): void {
  const open = new Set<LiveStream>();
  // Streams never finish by themselves: end them so shutdown does not wait its full 10 s.
  app.addHook('preClose', async () => {
    for (const s of open) s.close();
  });

  app.get(
    '/v1/events/stream',
    {
      // A HEAD would open a stream nobody reads.
      exposeHeadRoute: false,
      schema: {
        tags: ['events'],
        summary: "The team's events as Server-Sent Events, live (Last-Event-ID resumes)",
        description:
          'text/event-stream. Each event: `id: <event ID>` and `data: <event record JSON>`. ' +
          'Comment lines are heartbeats. Without `subject`, every subject of the team. ' +
          `A stream more than ${MAX_BUFFERED} bytes behind is cut: its last event is ` +
          `\`event: ${LAGGED_EVENT}\` with \`{error, last_event_id}\`; reconnect with Last-Event-ID. ` +
          'Open streams are limited per team (429 with Retry-After) and per process (503).',
        security: SECURED,
        querystring: Type.Object({
          subject: Type.Optional(
            Type.String({ maxLength: 200, description: 'env:<id>, dep:<id>, host:<id> or cmd:<id>' }),
          ),
        }),
        headers: Type.Object({
          'last-event-id': Type.Optional(Type.String({ maxLength: 64 })),
        }),
      },
    },
    async (req, reply) => {
      const { subject } = req.query;
      if (subject !== undefined) checkSubject(subject);
      const after = req.headers['last-event-id'] ?? '';
      if (after && !EVENT_ID_RE.test(after)) throw new BadRequest('Last-Event-ID must be an event ID');
      const team = req.headers['x-svc-team'];
      const s = new LiveStream({
        db: ctx.db,
        bus: ctx.events,
        auth: ctx.auth,
        teamId: req.caller.teamId,
        subject,
        credential: {
          authorization: req.headers.authorization,
          team: typeof team === 'string' ? team : undefined,
        },
        after,
        drop: () => {
          ctx.events.dropped++;
          reply.raw.destroy();
        },
      });
      const done = () => {
        open.delete(s);
        s.close();
      };
      // A client going away closes the response (the request's own 'close' is not that signal),
      // also while the stream is still joining its feed.
      reply.raw.once('close', done);
      s.out.once('close', done);
      await s.open();
      if (!reply.raw.destroyed) open.add(s);
      reply
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        .type('text/event-stream; charset=utf-8');
      void s.catchUp();
      return reply.send(s.out);
    },
  );
}
