// The replicas sharing one database, as this process sees them: its own replica (identity, lease),
// which replica holds each sidecar host's stream, and the notifications they send each other.
// Every replica listens on its own channel (commands and process output for it) and on one
// channel for all (hosts that connected or left, events appended). On a database for one replica
// (`Db.channels` absent) nothing is sent or listened to: everything stays in-process, and the host
// view is the hub's own.
import { KeyedQueue } from '../../shared/concurrency.ts';
import { Emitter } from '../../shared/emitter.ts';
import { guard } from '../../shared/faults.ts';
import type { Channels, Db } from '../db/types.ts';
import type { HostConnectivity } from '../hosts/connectivity.ts';
import type { HostGone, HostHello } from '../hosts/hub-events.ts';
import { KnownHellos } from '../hosts/known-hellos.ts';
import type { KnownHello, KnownHost } from '../hosts/store.ts';
import { Replica, type ReplicaLogger, type ReplicaTiming } from './replica.ts';
import {
  type HostLocation,
  holderOf,
  putLocation,
  releaseLocation,
  remoteLocations,
} from './replica-store.ts';

/** The channel every replica listens on. */
const ALL = 'svc_replicas';
export const channelOf = (replicaId: string): string => `svc_${replicaId}`;

/** A message to one replica, or to all (`from` is the sender). */
export type Message =
  /** `l`: a lane's key (`<host>/<lane>`); `p`: the origin's unsettled commands before it in the lane. */
  | { k: 'cmd'; id: string; h: string; l?: string; p?: string[] }
  /** `o`: the outcome as stored on the row, when it fits in the notification (else read the row). */
  | { k: 'done'; id: string; o?: { s: 'succeeded' | 'failed'; r?: string; e?: string; t?: string } }
  | { k: 'miss'; id: string }
  /** `a`: the output seq the holder's previous frame for this follower ended at (output-relay.ts). */
  | { k: 'out'; h: string; f: string; b: string; i: number; n: number; a?: number }
  /** Where the output a holder relayed to follower `f` so far ends (output-relay.ts). */
  | { k: 'tail'; h: string; f: string; a: number }
  | { k: 'up'; h: string; t: string; c: string }
  | { k: 'down'; h: string }
  | { k: 'evt'; t: string; ids: string[] }
  /** An API key was revoked: every replica forgets it at once, not when its cache entry ends. */
  | { k: 'key'; id: string };

/** Every kind of Message (a metric's label is one of these or 'other'); typed, so none is misspelt. */
const KINDS: ReadonlySet<string> = new Set<Message['k']>([
  'cmd',
  'done',
  'miss',
  'out',
  'tail',
  'up',
  'down',
  'evt',
  'key',
]);

export type ClusterEvents = {
  /** A message addressed to this replica (sent by `from`). */
  message: { from: string; m: Message };
  /** A host's stream is open on another replica. */
  up: { hostId: string; teamId: string; cloudId: string; replica: string };
  /** A host's stream on another replica ended (or that replica is gone). */
  down: HostGone;
  /** Events another replica appended (their ids, for the team's live streams). */
  events: { teamId: string; ids: string[] };
  /** An API key revoked through another replica. */
  keyRevoked: { keyId: string };
  /** The listening connection came back: notifications in between may be lost. */
  resync: undefined;
};

/** The host view the rest of the server asks (the hub's plus the other replicas'). */
export interface ClusterHosts extends HostConnectivity {
  waitForHost(teamId: string, cloudId: string, timeoutMs: number): Promise<string>;
  waitConnected(hostId: string, timeoutMs: number): Promise<boolean>;
}

export interface LocalHub extends HostConnectivity {
  on(name: 'hello', fn: (h: HostHello) => void): () => void;
  waitForHost(teamId: string, cloudId: string, timeoutMs: number): Promise<string>;
}

export class Cluster extends Emitter<ClusterEvents> {
  readonly replica: Replica;
  /** Known hosts' hellos here, written with their locations, many in one statement. */
  readonly hellos: KnownHellos;
  readonly #db: Db;
  readonly #channels: Channels | undefined;
  readonly #log: ReplicaLogger;
  /** Hosts whose stream another live replica holds. */
  readonly #remote = new Map<string, { replica: string; teamId: string; cloudId: string }>();
  /** Hosts whose stream is open here (their locations are written again if this replica revives). */
  readonly #held = new Map<string, HostLocation>();
  /** Per host: its location written and released in the order its streams came and went. */
  readonly #hostQueue = new KeyedQueue();
  /** Per host: streams admitted here (their location written) and not yet open or given up. */
  readonly #opening = new Map<string, number>();
  /** Per host, the number of the last notification about it (a reload must not undo a newer one). */
  readonly #touched = new Map<string, number>();
  #seq = 0;
  #abandoned = false;
  #ticks = 0;
  /** Notifications sent and heard, by `<sent|received>:<kind>` (the operator's /metrics). */
  readonly #messages = new Map<string, number>();

  constructor(db: Db, log: ReplicaLogger, timing: Partial<ReplicaTiming> = {}) {
    super((err, name) => log.warn({ err }, `cluster ${String(name)} handling failed`));
    this.#db = db;
    this.#channels = db.channels;
    this.#log = log;
    this.replica = new Replica(db, log, timing);
    this.hellos = new KnownHellos(db, this.replica.id);
  }

  get id(): string {
    return this.replica.id;
  }

  /** Several replicas may run: commands and streams may cross between them. */
  get shared(): boolean {
    return this.#channels !== undefined;
  }

  /** Registers this replica (refused: ReplicaRefused), listens, learns where hosts are, beats. */
  async start(): Promise<void> {
    await this.replica.register();
    const ch = this.#channels;
    if (ch) {
      ch.onReconnect(() => {
        if (this.#abandoned) return;
        this.emit('resync', undefined);
        void this.#reload().catch(() => {});
      });
      await ch.listen(channelOf(this.id), (p) => this.#heard(p, false));
      await ch.listen(ALL, (p) => this.#heard(p, true));
      await this.#reload();
    }
    this.replica.onTick(async (t) => {
      for (const d of t.dead) this.#forget(d.id, 'the control-plane replica holding its stream stopped');
      for (const [hostId, r] of this.#remote)
        if (!t.live.has(r.replica))
          this.#drop(hostId, 'the control-plane replica holding its stream stopped');
      // Taken for dead, the others released this replica's hosts: they are its own again.
      if (t.revived)
        for (const l of this.#held.values()) await this.#hostQueue.run(l.host_id, () => this.#put(l));
      // Notifications may be lost: the whole view is read again now and then.
      if (this.shared && (t.revived || ++this.#ticks % 10 === 0)) await this.#reload();
    });
    this.replica.start();
  }

  /** Sends `m` to one replica (nothing on a database for one replica). */
  send(replicaId: string, m: Message): void {
    if (!this.#channels || this.#abandoned) return;
    this.#count('sent', m);
    this.#channels.notify(channelOf(replicaId), JSON.stringify({ from: this.id, m }));
  }

  /** Sends `m` to every other replica. */
  broadcast(m: Message): void {
    if (!this.#channels || this.#abandoned) return;
    this.#count('sent', m);
    this.#channels.notify(ALL, JSON.stringify({ from: this.id, m }));
  }

  #count(direction: 'sent' | 'received', m: Message): void {
    // Kinds are this code's own; anything else a peer sent is counted as one label, not by name.
    const kind = typeof m.k === 'string' && KINDS.has(m.k) ? m.k : 'other';
    const key = `${direction}:${kind}`;
    this.#messages.set(key, (this.#messages.get(key) ?? 0) + 1);
  }

  /**
   * What crossed between this replica and the others: notifications by direction and kind, and
   * the hosts whose stream is here or on another live replica. For the operator's /metrics.
   */
  get traffic(): { messages: ReadonlyMap<string, number>; hostsHere: number; hostsElsewhere: number } {
    return { messages: this.#messages, hostsHere: this.#held.size, hostsElsewhere: this.#remote.size };
  }

  #heard(payload: string, all: boolean): void {
    if (this.#abandoned) return;
    let msg: { from: string; m: Message };
    try {
      msg = JSON.parse(payload);
    } catch {
      return;
    }
    if (!msg || typeof msg.from !== 'string' || msg.from === this.id || !msg.m) return;
    const m = msg.m;
    this.#count('received', m);
    if (!all) {
      this.emit('message', msg);
      return;
    }
    switch (m.k) {
      case 'up':
        this.#touched.set(m.h, ++this.#seq);
        this.#remote.set(m.h, { replica: msg.from, teamId: m.t, cloudId: m.c });
        this.emit('up', { hostId: m.h, teamId: m.t, cloudId: m.c, replica: msg.from });
        return;
      case 'down':
        this.#touched.set(m.h, ++this.#seq);
        if (this.#remote.get(m.h)?.replica === msg.from) this.#drop(m.h, 'host disconnected');
        return;
      case 'evt':
        this.emit('events', { teamId: m.t, ids: m.ids });
        return;
      case 'key':
        if (typeof m.id === 'string') this.emit('keyRevoked', { keyId: m.id });
        return;
    }
  }

  /**
   * A known host's hello here, checked and recorded with its location in one statement, in turn
   * with the host's other location changes here. Until its stream opens (`hostConnected`) or is
   * given up (`unlocate`), no earlier stream's end takes the location back.
   */
  admit(h: KnownHello): Promise<KnownHost | undefined> {
    return this.#hostQueue.run(h.id, async () => {
      const k = await this.hellos.admit(h);
      if (!k) return undefined;
      this.#opening.set(h.id, (this.#opening.get(h.id) ?? 0) + 1);
      this.#held.set(h.id, { host_id: h.id, replica_id: this.id, team_id: k.teamId, cloud_id: k.cloudId });
      return k;
    });
  }

  /** An admitted stream closed before it opened: its location goes unless a newer stream holds it. */
  unlocate(hostId: string, openHere: () => boolean): Promise<void> {
    this.#opened(hostId);
    return this.hostGone(hostId, openHere);
  }

  #opened(hostId: string): void {
    const n = (this.#opening.get(hostId) ?? 0) - 1;
    if (n > 0) this.#opening.set(hostId, n);
    else this.#opening.delete(hostId);
  }

  /** The hub accepted a host's stream here: it is this replica's now, for every replica. */
  hostConnected(h: HostHello): Promise<void> {
    this.#remote.delete(h.hostId);
    const l = { host_id: h.hostId, replica_id: this.id, team_id: h.teamId, cloud_id: h.cloudId };
    if (h.located) {
      // Written with the hello (admit): only the others are told.
      this.#opened(h.hostId);
      this.broadcast({ k: 'up', h: l.host_id, t: l.team_id, c: l.cloud_id });
      return Promise.resolve();
    }
    this.#held.set(h.hostId, l);
    return this.#hostQueue.run(h.hostId, () => this.#put(l));
  }

  async #put(l: HostLocation): Promise<void> {
    if (this.#held.get(l.host_id) !== l) return;
    await putLocation(this.#db, l);
    this.broadcast({ k: 'up', h: l.host_id, t: l.team_id, c: l.cloud_id });
  }

  /**
   * The host's stream here ended (not replaced): its location goes and the host is unreachable,
   * unless another replica holds it by now, or a newer stream here does (`openHere`, asked in turn).
   */
  hostGone(hostId: string, openHere: () => boolean): Promise<void> {
    return this.#hostQueue.run(hostId, async () => {
      if (openHere() || this.#opening.has(hostId)) return;
      this.#held.delete(hostId);
      if (await releaseLocation(this.#db, hostId, this.id)) this.broadcast({ k: 'down', h: hostId });
    });
  }

  /**
   * The live replica holding `hostId`'s stream: what this replica knows, else (or with `fresh`)
   * the database's.
   */
  async holderOf(hostId: string, fresh = false): Promise<string | undefined> {
    if (!this.shared) return undefined;
    return (fresh ? undefined : this.#remote.get(hostId)?.replica) ?? (await holderOf(this.#db, hostId));
  }

  /** True while another live replica holds `hostId`'s stream. */
  heldElsewhere(hostId: string): boolean {
    return this.#remote.has(hostId);
  }

  async #reload(): Promise<void> {
    const from = this.#seq;
    const rows: HostLocation[] = await remoteLocations(this.#db, this.id);
    // A host a notification spoke of while the rows were read is as that notification said.
    const newer = (hostId: string) => (this.#touched.get(hostId) ?? 0) > from;
    for (const [hostId, seq] of [...this.#touched]) if (seq <= from) this.#touched.delete(hostId);
    const now = new Set(rows.map((r) => r.host_id));
    for (const hostId of [...this.#remote.keys()])
      if (!now.has(hostId) && !newer(hostId)) this.#drop(hostId, 'host disconnected');
    for (const r of rows) {
      if (newer(r.host_id)) continue;
      const was = this.#remote.get(r.host_id);
      this.#remote.set(r.host_id, { replica: r.replica_id, teamId: r.team_id, cloudId: r.cloud_id });
      if (was?.replica !== r.replica_id)
        this.emit('up', { hostId: r.host_id, teamId: r.team_id, cloudId: r.cloud_id, replica: r.replica_id });
    }
  }

  #forget(replicaId: string, reason: string): void {
    for (const [hostId, r] of [...this.#remote]) if (r.replica === replicaId) this.#drop(hostId, reason);
  }

  #drop(hostId: string, reason: string): void {
    if (!this.#remote.delete(hostId)) return;
    this.emit('down', { hostId, reason, replaced: false });
  }

  /** The view of hosts for the rest of the server: `hub`'s streams and the other replicas'. */
  hosts(hub: LocalHub): ClusterHosts {
    const isConnected = (hostId: string) => hub.isConnected(hostId) || this.#remote.has(hostId);
    return {
      isConnected,
      connectedCount: () => hub.connectedCount?.() ?? 0,
      waitConnected: (hostId, timeoutMs) => {
        if (isConnected(hostId)) return Promise.resolve(true);
        return this.#waitFor(hub, (h) => (h.hostId === hostId ? h.hostId : null), timeoutMs).then(
          (id) => id !== null,
        );
      },
      waitForHost: async (teamId, cloudId, timeoutMs) => {
        const match = (h: { hostId: string; teamId: string; cloudId: string }) =>
          h.teamId === teamId && (!cloudId || h.cloudId === cloudId) ? h.hostId : null;
        const id = await this.#waitFor(hub, match, timeoutMs);
        if (id === null) throw new Error(`no host joined within ${Math.round(timeoutMs / 1000)} s`);
        return id;
      },
    };
  }

  /** The first host, here or on another replica, that `match` takes within `timeoutMs` (else null). */
  #waitFor(
    hub: LocalHub,
    match: (h: { hostId: string; teamId: string; cloudId: string }) => string | null,
    timeoutMs: number,
  ): Promise<string | null> {
    return new Promise((resolve) => {
      const done = (id: string | null) => {
        clearTimeout(timer);
        offHub();
        offUp();
        resolve(id);
      };
      const offHub = hub.on('hello', (h) => {
        const id = match(h);
        if (id !== null) done(id);
      });
      const offUp = this.on('up', (h) => {
        const id = match(h);
        if (id !== null) done(id);
      });
      const timer = setTimeout(
        guard('cluster: host wait', () => done(null)),
        timeoutMs,
      );
    });
  }

  /**
   * Stops as a killed process would (tests): no heartbeat, nothing sent or heard, nothing cleaned
   * up; the others find it dead once its lease lapses.
   */
  async abandon(): Promise<void> {
    this.#abandoned = true;
    await this.replica.stop(false);
  }

  /** A clean stop: the heartbeat ends and the row goes, so the others take over at once. */
  async close(): Promise<void> {
    if (this.#abandoned) return;
    await this.replica.stop(true);
    this.#log.info({ replica: this.id }, 'replica stopped');
  }
}
