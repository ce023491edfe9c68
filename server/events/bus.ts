// Live events, fanned out: one feed per team that has open streams, however many streams it has.
// A feed hears each appended event once its transaction commits (store.ts `LiveEvents`), frames it
// once, and hands the same bytes to every follower of the team in one order. Rows stay the truth:
// one poll per team (not per stream) reads the ids of the look-back window and fetches only the
// rows it has not seen, which catches writers that do not publish (another process, a row inserted
// after a later-numbered one). Followers (stream.ts) bound their own buffers; this module bounds
// how many there are, per process and per team.
import { idFloor, PREFIX } from '../../protocol/ids.ts';
import { guard } from '../../shared/faults.ts';
import type { Db } from '../db/types.ts';
import { SvcError, TooManyRequests } from '../errors.ts';
import { type Event, eventIdsAfter, eventsByIds, type LiveEvents } from './store.ts';

/** Timings of every feed and stream; tests shorten them. */
export const STREAM_TIMING = {
  heartbeatMs: 15_000,
  pollMs: 2_000,
  lookbackMs: 10_000,
  /** How long a cut stream may take to take its last bytes before its connection is closed. */
  cutGraceMs: 10_000,
};

/** Ids per poll read, and rows per body read. */
const ID_PAGE = 500;
const ROW_PAGE = 50;

export interface StreamLimits {
  /** Open streams in the process; beyond it a new one is 503 (EventSource retries). */
  perProcess: number;
  /** Open streams of one team; beyond it a new one is 429, so one team cannot take them all. */
  perTeam: number;
}

export const STREAM_LIMITS: StreamLimits = { perProcess: 2_000, perTeam: 100 };

/** One event as every follower writes it: framed once, the same bytes for all. */
export interface LiveFrame {
  id: string;
  subject: string;
  bytes: Buffer;
}

export interface Follower {
  readonly teamId: string;
  /** The most unsent bytes it has held. */
  readonly peakBuffered: number;
  /** Takes the next frame of the team, in the feed's order. Must not throw (it is guarded anyway). */
  deliver(frame: LiveFrame): void;
}

export function frameOf(e: Event): LiveFrame {
  return { id: e.ID, subject: e.Subject, bytes: Buffer.from(`id: ${e.ID}\ndata: ${JSON.stringify(e)}\n\n`) };
}

class TeamFeed {
  readonly followers = new Set<Follower>();
  /** Ids in the look-back window this feed has delivered (or found there when it started). */
  #seen = new Set<string>();
  #polling: Promise<void> | null = null;
  #timer: NodeJS.Timeout;
  readonly ready: Promise<void>;
  polls = 0;

  readonly teamId: string;
  #db: Db;

  constructor(db: Db, teamId: string) {
    this.#db = db;
    this.teamId = teamId;
    // What is already in the window predates every follower: seen, not delivered.
    this.ready = this.#poll(false).catch(() => {});
    this.#timer = setInterval(() => this.poll(), STREAM_TIMING.pollMs);
    this.#timer.unref();
  }

  offer(e: Event): void {
    if (this.#seen.has(e.ID)) return;
    this.#seen.add(e.ID);
    const frame = frameOf(e);
    for (const f of this.followers) {
      try {
        f.deliver(frame);
      } catch {
        // A follower's failure is its own; the others still get the event.
      }
    }
  }

  /** One poll at a time; a DB error waits for the next one. */
  poll(): Promise<void> {
    this.#polling ??= this.ready
      .then(() => this.#poll(true))
      .catch(() => {})
      .finally(() => {
        this.#polling = null;
      });
    return this.#polling;
  }

  async #poll(deliver: boolean): Promise<void> {
    this.polls++;
    const floor = idFloor(PREFIX.event, Date.now() - STREAM_TIMING.lookbackMs);
    for (const id of this.#seen) if (id < floor) this.#seen.delete(id);
    for (let after = floor; this.followers.size > 0 || !deliver; ) {
      const ids = await eventIdsAfter(this.#db, this.teamId, after, ID_PAGE);
      const fresh = ids.filter((id) => !this.#seen.has(id));
      if (!deliver) for (const id of fresh) this.#seen.add(id);
      else
        for (let i = 0; i < fresh.length; i += ROW_PAGE) {
          for (const e of await eventsByIds(this.#db, this.teamId, fresh.slice(i, i + ROW_PAGE)))
            this.offer(e);
        }
      if (ids.length < ID_PAGE) return;
      after = ids[ids.length - 1];
    }
  }

  /** Events another replica appended (told after their commit): those not seen yet go out now. */
  async fetch(ids: readonly string[]): Promise<void> {
    await this.ready;
    const fresh = ids.filter((id) => !this.#seen.has(id));
    for (let i = 0; i < fresh.length; i += ROW_PAGE)
      for (const e of await eventsByIds(this.#db, this.teamId, fresh.slice(i, i + ROW_PAGE))) this.offer(e);
  }

  close(): void {
    clearInterval(this.#timer);
  }
}

/** Event ids per announcement to the other replicas (its payload stays far under 7 KB). */
const IDS_PER_ANNOUNCEMENT = 100;

/** The process's live events: a member of the application context (main.ts). */
export class EventBus implements LiveEvents {
  readonly limits: StreamLimits;
  #feeds = new Map<string, TeamFeed>();
  #open = 0;
  #db: Db;
  /** The most unsent bytes any stream that has left held (tests check the bound). */
  peakBuffered = 0;
  /** Cut streams whose connection was closed because their client took nothing within the grace. */
  dropped = 0;

  /** Tells the other replicas which events were appended here (absent with one replica). */
  #announce: ((teamId: string, ids: string[]) => void) | undefined;
  /** Ids appended this turn, by team, announced together at its end. */
  #unannounced = new Map<string, string[]>();

  constructor(
    db: Db,
    limits: Partial<StreamLimits> = {},
    announce?: (teamId: string, ids: string[]) => void,
  ) {
    this.#db = db;
    this.limits = { ...STREAM_LIMITS, ...limits };
    this.#announce = announce;
  }

  publish(e: Event): void {
    this.#feeds.get(e.TeamID)?.offer(e);
    if (!this.#announce) return;
    // Committed already: the other replicas read the rows as soon as they hear of them.
    if (this.#unannounced.size === 0)
      setImmediate(guard('events: announce to other replicas', () => this.#flushAnnouncements()));
    const ids = this.#unannounced.get(e.TeamID);
    if (ids) ids.push(e.ID);
    else this.#unannounced.set(e.TeamID, [e.ID]);
  }

  #flushAnnouncements(): void {
    const all = this.#unannounced;
    this.#unannounced = new Map();
    for (const [teamId, ids] of all)
      for (let i = 0; i < ids.length; i += IDS_PER_ANNOUNCEMENT) {
        try {
          this.#announce?.(teamId, ids.slice(i, i + IDS_PER_ANNOUNCEMENT));
        } catch {
          // The team's poll finds them (rows stay the truth).
        }
      }
  }

  /** Another replica appended these events: the team's streams here get them now. */
  heard(teamId: string, ids: readonly string[]): void {
    this.#feeds
      .get(teamId)
      ?.fetch(ids)
      .catch(() => {});
  }

  /**
   * Adds a follower to its team's feed (made on first use), or refuses: 503 when the process has
   * its limit of streams, 429 when the team has. Resolves once the feed knows its window, so
   * nothing appended from now on is missed. Returns the way out (idempotent).
   */
  async join(f: Follower): Promise<() => void> {
    if (this.#open >= this.limits.perProcess)
      throw new SvcError(503, 'too many open event streams; retry later');
    let feed = this.#feeds.get(f.teamId);
    if (feed && feed.followers.size >= this.limits.perTeam) {
      throw new TooManyRequests(
        `this team has ${this.limits.perTeam} open event streams, its limit; close one and retry`,
        STREAM_TIMING.pollMs / 1000,
      );
    }
    if (!feed) {
      feed = new TeamFeed(this.#db, f.teamId);
      this.#feeds.set(f.teamId, feed);
    }
    feed.followers.add(f);
    this.#open++;
    const joined = feed;
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      joined.followers.delete(f);
      this.#open--;
      this.peakBuffered = Math.max(this.peakBuffered, f.peakBuffered);
      if (joined.followers.size === 0 && this.#feeds.get(f.teamId) === joined) {
        joined.close();
        this.#feeds.delete(f.teamId);
      }
    };
    await joined.ready;
    return leave;
  }

  /** Open streams: of one team, or of the process. */
  streams(teamId?: string): number {
    return teamId === undefined ? this.#open : (this.#feeds.get(teamId)?.followers.size ?? 0);
  }

  /** Feeds (one reader each) and the polls they have made: tests check that streams share them. */
  feeds(): { teams: number; polls: number } {
    let polls = 0;
    for (const f of this.#feeds.values()) polls += f.polls;
    return { teams: this.#feeds.size, polls };
  }

  close(): void {
    for (const f of this.#feeds.values()) f.close();
    this.#feeds.clear();
  }
}
