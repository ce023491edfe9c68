// Keeps a sidecar host's records in step with its stream, from the hub's events: a host that says
// hello is asked for its capabilities (host.report, a few hosts at a time) and they are recorded;
// a host whose stream ends is marked unreachable (spec "Host stream protocol"); its event frames
// are appended to the events table under `host:<id>` (the hub has already applied their size and
// rate limits), in the order sent, and the host is marked unreachable only after its stream's
// events are stored.
import { checkCapabilities } from '../../protocol/hello.ts';
import { KeyedQueue, Limiter } from '../../shared/concurrency.ts';
import type { Db } from '../db/types.ts';
import { appendEvent, type LiveEvents } from '../events/store.ts';
import type { Dispatcher } from './dispatcher.ts';
import type { HostFrame, HostGone, HostHello } from './hub-events.ts';
import { updateHost } from './store.ts';

export const HOST_REPORT_TIMEOUT_MS = 30_000;
/**
 * host.report asked of this many hosts at once. When thousands of hosts say hello together (a
 * replica died and its hosts came here), their reports (three statements each, for capabilities
 * the hellos already carried) would otherwise queue in the database pool ahead of the hellos still
 * waiting and of the first commands on the hosts; fewer than the pool's connections, they never
 * take it all.
 */
export const HOST_REPORTS_AT_ONCE = 4;

export interface HostRecordsLogger {
  warn(obj: object, msg: string): void;
}

export class HostRecords {
  #db: Db;
  #dispatcher: Dispatcher;
  #log: HostRecordsLogger;
  /** Per host: event inserts, then the unreachable mark, in stream order. */
  #queue = new KeyedQueue();
  #events: LiveEvents | undefined;
  #reports = new Limiter(HOST_REPORTS_AT_ONCE, 'host.report');

  /** Marks a host whose stream here ended unreachable (unless another replica holds it now). */
  #release: (hostId: string) => Promise<void>;

  constructor(
    db: Db,
    dispatcher: Dispatcher,
    log: HostRecordsLogger,
    events?: LiveEvents,
    release?: (hostId: string) => Promise<void>,
  ) {
    this.#db = db;
    this.#release = release ?? ((hostId) => updateHost(db, hostId, { status: 'unreachable' }));
    this.#dispatcher = dispatcher;
    this.#log = log;
    this.#events = events;
  }

  /**
   * Asks a host that just connected for its capabilities (host.report) and records them, a few
   * hosts at a time; a host whose stream is gone by its turn is not asked. A known host whose hello
   * carried the capabilities already recorded is not asked either: svcd's hello and its report
   * describe the host with the same detection, so the report would record what is there, and
   * asking would cost three statements per host when a dead replica's hosts come here together.
   */
  connected(h: HostHello): Promise<void> {
    if (h.capabilitiesRecorded) return Promise.resolve();
    return this.#reports.run(async () => {
      if (!h.current()) return;
      try {
        const r = await this.#dispatcher.run(
          { hostId: h.hostId, teamId: h.teamId, kind: 'sidecar' },
          '',
          'host.report',
          {},
          HOST_REPORT_TIMEOUT_MS,
        );
        checkCapabilities(r.capabilities ?? {});
        // A report that arrives after its stream was replaced or closed describes nothing current.
        if (h.current())
          await updateHost(this.#db, h.hostId, {
            capabilities: r.capabilities as unknown as Record<string, unknown>,
          });
      } catch (err) {
        this.#log.warn({ host: h.hostId, err: (err as Error).message }, 'host.report failed');
      }
    });
  }

  /** Event frames only; every other frame passes without a promise. */
  received(e: HostFrame): Promise<void> | undefined {
    const f = e.frame;
    if (f.type !== 'event') return;
    return this.#queue.run(e.hostId, () =>
      appendEvent(this.#db, e.teamId, `host:${e.hostId}`, f.kind || 'event', f.payload ?? null, this.#events),
    );
  }

  /** A replaced stream's host is connected again: only a host with no stream is unreachable. */
  async gone(e: HostGone): Promise<void> {
    if (e.replaced) return;
    await this.#queue.run(e.hostId, () => this.#release(e.hostId).catch(() => {}));
  }
}
