// LISTEN/NOTIFY between replicas on Postgres (types.ts `Channels`). Listening takes one dedicated
// connection of its own (a pooled one would be handed to others between queries); when it drops or
// stops answering its ping, it is connected again with backoff and every channel is listened to
// again, and `onReconnect` tells the listeners that notifications in between may be lost.
// Notifications go out on the same connection when it is up (so they leave in the order queued),
// else through the pool; those of one turn are sent in one statement.
import pg from 'pg';
import { guard } from '../../shared/faults.ts';
import { type Channels, MAX_NOTIFICATION_BYTES } from './types.ts';

/** Bounds of the listening connection: connect and each query, the ping's period, the backoff. */
export const CHANNEL_TIMING = { connectMs: 10_000, pingMs: 5_000, retryMinMs: 100, retryMaxMs: 5_000 };
const CHANNEL_RE = /^[a-z0-9_]{1,63}$/;
/** Notifications per statement (a turn with more sends several). */
const BATCH = 500;

export class PgChannels implements Channels {
  readonly #dsn: string;
  readonly #pool: pg.Pool;
  #client: pg.Client | null = null;
  #connecting: Promise<pg.Client | null> | null = null;
  readonly #listeners = new Map<string, Set<(payload: string) => void>>();
  readonly #reconnected: (() => void)[] = [];
  #queue: [string, string][] = [];
  #flushing: Promise<void> | null = null;
  #retryMs = CHANNEL_TIMING.retryMinMs;
  #retry: NodeJS.Timeout | null = null;
  #ping: NodeJS.Timeout | null = null;
  #everConnected = false;
  #closed = false;

  constructor(dsn: string, pool: pg.Pool) {
    this.#dsn = dsn;
    this.#pool = pool;
  }

  async listen(channel: string, fn: (payload: string) => void): Promise<void> {
    if (!CHANNEL_RE.test(channel)) throw new Error(`bad channel name ${channel}`);
    let set = this.#listeners.get(channel);
    if (!set) {
      set = new Set();
      this.#listeners.set(channel, set);
    }
    set.add(fn);
    const client = this.#client ?? (await this.#connect());
    if (!client) throw new Error('the listening connection to Postgres is down');
    if (set.size === 1) await client.query(`LISTEN ${channel}`);
  }

  notify(channel: string, payload: string): void {
    if (this.#closed) return;
    if (!CHANNEL_RE.test(channel)) throw new Error(`bad channel name ${channel}`);
    if (Buffer.byteLength(payload) > MAX_NOTIFICATION_BYTES)
      throw new Error(`notification of ${Buffer.byteLength(payload)} bytes is over the limit`);
    this.#queue.push([channel, payload]);
    if (this.#queue.length === 1 && !this.#flushing)
      setImmediate(guard('channels: notify', () => this.#flush()));
  }

  onReconnect(fn: () => void): void {
    this.#reconnected.push(fn);
  }

  #flush(): Promise<void> {
    this.#flushing ??= this.#send().finally(() => {
      this.#flushing = null;
    });
    return this.#flushing;
  }

  async #send(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, BATCH);
      const sql = 'SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) AS t(c, p)';
      const params = [batch.map((b) => b[0]), batch.map((b) => b[1])];
      // Delivery is at most once: a batch that fails is dropped (listeners re-read rows).
      await (this.#client ?? this.#pool).query(sql, params).catch(() => {});
    }
  }

  #connect(): Promise<pg.Client | null> {
    this.#connecting ??= this.#open().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  async #open(): Promise<pg.Client | null> {
    if (this.#closed) return null;
    const client = new pg.Client({
      connectionString: this.#dsn,
      connectionTimeoutMillis: CHANNEL_TIMING.connectMs,
      query_timeout: CHANNEL_TIMING.connectMs,
      keepAlive: true,
    });
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (m) => this.#deliver(m.channel, m.payload ?? ''));
    try {
      await client.connect();
      for (const channel of this.#listeners.keys()) await client.query(`LISTEN ${channel}`);
    } catch {
      client.end().catch(() => {});
      this.#schedule();
      return null;
    }
    if (this.#closed) {
      await client.end().catch(() => {});
      return null;
    }
    this.#client = client;
    this.#retryMs = CHANNEL_TIMING.retryMinMs;
    this.#ping = setInterval(
      guard('channels: ping', () => {
        client.query('SELECT 1').catch(() => this.#lost(client));
      }),
      CHANNEL_TIMING.pingMs,
    );
    this.#ping.unref();
    const again = this.#everConnected;
    this.#everConnected = true;
    if (again) for (const fn of this.#reconnected) guard('channels: reconnected', fn)();
    return client;
  }

  #deliver(channel: string, payload: string): void {
    for (const fn of this.#listeners.get(channel) ?? []) guard('channels: notification', fn)(payload);
  }

  /** The connection dropped or stopped answering: drop it and connect again. */
  #lost(client: pg.Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    if (this.#ping) clearInterval(this.#ping);
    client.end().catch(() => {});
    this.#schedule();
  }

  #schedule(): void {
    if (this.#closed || this.#retry) return;
    this.#retry = setTimeout(
      guard('channels: reconnect', () => {
        this.#retry = null;
        void this.#connect();
      }),
      this.#retryMs,
    );
    this.#retry.unref();
    this.#retryMs = Math.min(this.#retryMs * 2, CHANNEL_TIMING.retryMaxMs);
  }

  async close(): Promise<void> {
    // What was queued before the close still goes (a replica's goodbye).
    await this.#flush();
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    if (this.#ping) clearInterval(this.#ping);
    await this.#connecting?.catch(() => null);
    const client = this.#client;
    this.#client = null;
    await client?.end().catch(() => {});
  }
}
