// Commands and process output between replicas, the command row as the truth. The origin (the
// replica a caller asked) records the row as always, then tells the replica holding the host's
// stream (`cmd`); the holder takes the row once (claimCommand: a command reaches a host at most
// once), writes it to the stream, stores the host's outcome on the row and tells the origin
// (`done`), which reads the row and answers its caller. Notifications may be lost: on every
// heartbeat the origin reads the rows it still waits for (settling the finished, telling the holder
// again of the untaken) and fails, as host_gone, what a holder that stopped was sending.
// A process followed through this replica whose host is on another: the holder sends each output
// frame to the follower's replica, cut into notification-sized pieces.
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, frame } from '../../protocol/frames.ts';
import { decodeOutput, encodeOutput, type OutputFrame } from '../../protocol/processes.ts';
import { Emitter } from '../../shared/emitter.ts';
import type { Db } from '../db/types.ts';
import { type CommandOutcome, claimCommand, commandOutcomes, finishCommand } from '../hosts/command-store.ts';
import { CommandError, type Pending, type RemoteHosts } from '../hosts/dispatcher.ts';
import type { HostGone, HostOutput } from '../hosts/hub-events.ts';
import { checkResult, MalformedResult } from '../hosts/result-check.ts';
import type { Cluster, Message } from './cluster.ts';

/** Base64 characters of an output frame per notification (with its envelope, under 7 KB). */
const PIECE_CHARS = 6_000;
/** A result or error this long at most rides in the `done` notification (longer: the row is read). */
const OUTCOME_IN_NOTIFICATION = 5_000;
/** Pieces of one frame being put together, at most, per follower (a frame past it is dropped). */
const MAX_PIECES = 64;

interface Waiting extends Pending {
  holder: string;
  at: number;
  /** Replicas that said they do not hold the host (a location that moved): bounded. */
  misses: number;
}

/** Holders a command may be offered to in turn while its host moves between replicas. */
const MAX_MISSES = 3;

interface Sending {
  origin: string;
  hostId: string;
  kind: string;
  ackedAt?: string;
}

export type RelayEvents = {
  /** An output frame another replica relayed for a follower of this one. */
  output: HostOutput;
};

export interface HostWriter {
  isConnected(hostId: string): boolean;
  write(hostId: string, f: Frame): boolean;
}

export class CommandRelay extends Emitter<RelayEvents> implements RemoteHosts {
  #db: Db;
  #cluster: Cluster;
  #hub: HostWriter;
  /** Origin side: commands sent through other replicas, by id. */
  #waiting = new Map<string, Waiting>();
  /** Holder side: commands this replica wrote to a host here for another replica, by id. */
  #sending = new Map<string, Sending>();
  /** Holder side: followers of another replica on a host here, by `<host>/<follower>`: their replica. */
  #follows = new Map<string, string>();
  /** Origin side: output frames arriving in pieces, by `<replica>/<host>/<follower>`. */
  #pieces = new Map<string, string[]>();
  /** Origin: commands settled from their finished row, until the dispatcher asks (finishedElsewhere). */
  #finished = new Set<string>();

  constructor(db: Db, cluster: Cluster, hub: HostWriter, log: { warn(obj: object, msg: string): void }) {
    super((err) => log.warn({ err }, 'relayed output handling failed'));
    this.#db = db;
    this.#cluster = cluster;
    this.#hub = hub;
    cluster.on('message', ({ from, m }) => this.#message(from, m));
    cluster.on('up', ({ hostId, replica }) => this.moved(hostId, replica));
    cluster.on('resync', () => this.#poll(0));
    cluster.replica.onTick(async (t) => {
      for (const d of t.dead)
        for (const [k, origin] of this.#follows) if (origin === d.id) this.#follows.delete(k);
      await this.#poll(cluster.replica.timing.heartbeatMs, t.live);
    });
  }

  /** Commands waiting on other replicas, and commands written here for others (tests, metrics). */
  get counts(): { waiting: number; sending: number; follows: number } {
    return { waiting: this.#waiting.size, sending: this.#sending.size, follows: this.#follows.size };
  }

  forward(p: Pending): void {
    this.#cluster.holderOf(p.hostId).then(
      (holder) => {
        if (!holder)
          return p.reject(new CommandError('host_gone', `host ${p.hostId} is not connected`, p.id));
        this.#waiting.set(p.id, { ...p, holder, at: Date.now(), misses: 0 });
        this.#cluster.send(holder, { k: 'cmd', id: p.id, h: p.hostId });
      },
      (err) => p.reject(err as Error),
    );
  }

  /**
   * Origin: the host said hello on `replica` (another, or this one), so the stream its commands
   * were sent to is gone. One the old holder wrote to that stream fails now as host_gone (a clear
   * 502), not when the old holder's lease lapses, which would hold the environment's next command
   * behind it that long; one nobody took yet goes where the host is now.
   */
  moved(hostId: string, replica: string): void {
    const stale = [...this.#waiting.values()].filter((w) => w.hostId === hostId && w.holder !== replica);
    if (stale.length === 0) return;
    commandOutcomes(
      this.#db,
      stale.map((w) => w.id),
    ).then(
      (rows) => {
        for (const o of rows) {
          const w = this.#waiting.get(o.id);
          if (!w || w.holder === replica) continue;
          if (o.finished) this.#settleFrom(o);
          else if (o.holder === '') void this.#missed(w.holder, w.id).catch((err) => w.reject(err as Error));
          else {
            this.#waiting.delete(w.id);
            const why = `${w.kind}: host ${hostId}'s stream moved to another control-plane replica while this command ran there`;
            w.reject(new CommandError('host_gone', why, w.id));
          }
        }
      },
      () => {
        // The heartbeat's poll settles them (or the holder's lease does).
      },
    );
  }

  settled(id: string): void {
    this.#waiting.delete(id);
    this.#finished.delete(id);
  }

  async #message(from: string, m: Message): Promise<void> {
    switch (m.k) {
      case 'cmd':
        return this.#take(from, m.id, m.h);
      case 'done':
        return this.#settle(m);
      case 'miss':
        return this.#missed(from, m.id);
      case 'out':
        return this.#piece(from, m);
    }
  }

  /**
   * Holder: takes the command (once) and writes it to the host's stream here. A replica without
   * the stream (the host moved on) leaves the row untaken and says so: the origin looks again.
   */
  async #take(origin: string, id: string, hostId: string): Promise<void> {
    if (!this.#hub.isConnected(hostId)) {
      this.#cluster.send(origin, { k: 'miss', id });
      return;
    }
    const row = await claimCommand(this.#db, id, this.#cluster.id);
    if (!row || row.host_id !== hostId) return;
    const payload = JSON.parse(row.payload) as Record<string, unknown>;
    const f = frame('command', { command_id: id, kind: row.kind, env_id: row.env_id, payload });
    const s: Sending = { origin, hostId, kind: row.kind };
    if (!this.#hub.write(hostId, f)) {
      await this.#finish(id, s, {
        ok: false,
        error: `${row.kind}: host ${hostId} is not connected`,
        type: 'host_gone',
      });
      return;
    }
    this.#sending.set(id, s);
    if (row.kind === 'proc.attach') this.#follows.set(`${hostId}/${payload.follow}`, origin);
    if (row.kind === 'proc.detach') this.#follows.delete(`${hostId}/${payload.follow}`);
  }

  received(hostId: string, f: Frame): boolean {
    const id = f.command_id as string;
    const s = this.#sending.get(id);
    if (!s || s.hostId !== hostId) return false;
    if (f.type === 'ack') {
      s.ackedAt ??= new Date().toISOString();
      return true;
    }
    this.#sending.delete(id);
    let outcome: Parameters<typeof finishCommand>[2];
    if (!f.ok)
      outcome = {
        ok: false,
        error: f.error || `${s.kind} failed without a reason`,
        type: f.error_type ?? 'host_error',
      };
    else
      try {
        outcome = { ok: true, result: checkResult(s.kind as CommandKind, f.payload ?? {}) };
      } catch (err) {
        const type = err instanceof MalformedResult ? 'malformed' : 'host_error';
        outcome = { ok: false, error: (err as Error).message, type };
      }
    void this.#finish(id, s, outcome);
    return true;
  }

  gone(e: HostGone): void {
    for (const [id, s] of [...this.#sending]) {
      if (s.hostId !== e.hostId) continue;
      this.#sending.delete(id);
      void this.#finish(id, s, { ok: false, error: `${s.kind}: ${e.reason}`, type: 'host_gone' });
    }
    for (const [key, origin] of [...this.#follows]) {
      if (!key.startsWith(`${e.hostId}/`)) continue;
      this.#follows.delete(key);
      const reason = `the host's stream dropped (${e.reason}); attach again to resume`;
      this.#relay(origin, e.hostId, {
        kind: 'end',
        follow: key.slice(e.hostId.length + 1),
        end: { exit_code: null, reason },
      });
    }
  }

  /** Holder: the outcome on the row, then the origin told (with the outcome, when it fits). */
  async #finish(id: string, s: Sending, outcome: Parameters<typeof finishCommand>[2]): Promise<void> {
    if (!(await finishCommand(this.#db, id, outcome, s.ackedAt).catch(() => false))) {
      // Finished already (the origin gave up): it reads the row if it still waits.
      this.#cluster.send(s.origin, { k: 'done', id });
      return;
    }
    const o = outcome.ok
      ? { s: 'succeeded' as const, r: JSON.stringify(outcome.result) }
      : { s: 'failed' as const, e: outcome.error, t: outcome.type };
    const carried = Buffer.byteLength(o.r ?? o.e ?? '') <= OUTCOME_IN_NOTIFICATION;
    this.#cluster.send(s.origin, carried ? { k: 'done', id, o } : { k: 'done', id });
  }

  /**
   * Origin: the replica told did not hold the host. Where the database says it is now gets it
   * (this replica too: then it is written here, and its outcome comes back as a local one).
   */
  async #missed(from: string, id: string): Promise<void> {
    const w = this.#waiting.get(id);
    if (!w || w.holder !== from) return;
    const holder = await this.#cluster.holderOf(w.hostId, true);
    const gone = () => {
      this.#waiting.delete(id);
      w.reject(new CommandError('host_gone', `host ${w.hostId} is not connected`, id));
    };
    if (!holder || holder === from || ++w.misses > MAX_MISSES) return gone();
    if (holder !== this.#cluster.id) {
      w.holder = holder;
      w.at = Date.now();
      this.#cluster.send(holder, { k: 'cmd', id, h: w.hostId });
      return;
    }
    const row = await claimCommand(this.#db, id, this.#cluster.id);
    if (!row) return;
    this.#waiting.delete(id);
    const payload = JSON.parse(row.payload) as Record<string, unknown>;
    if (
      !this.#hub.write(
        w.hostId,
        frame('command', { command_id: id, kind: row.kind, env_id: row.env_id, payload }),
      )
    )
      w.reject(new CommandError('host_gone', `host ${w.hostId} is not connected`, id));
  }

  /** Origin: the row of a command sent through another replica has its outcome. */
  async #settle(m: Extract<Message, { k: 'done' }>): Promise<void> {
    if (!this.#waiting.has(m.id)) return;
    if (m.o) {
      const { s, r, e, t } = m.o;
      return this.#settleFrom({
        id: m.id,
        status: s,
        result: r ?? null,
        error: e ?? '',
        error_type: t ?? '',
      });
    }
    const [o] = await commandOutcomes(this.#db, [m.id]);
    if (o?.finished) this.#settleFrom(o);
  }

  /** Commands whose outcome is on their row already: the origin need not write it again. */
  finishedElsewhere(id: string): boolean {
    return this.#finished.delete(id);
  }

  #settleFrom(o: Pick<CommandOutcome, 'id' | 'status' | 'result' | 'error' | 'error_type'>): void {
    const w = this.#waiting.get(o.id);
    if (!w) return;
    this.#waiting.delete(o.id);
    this.#finished.add(o.id);
    if (o.status === 'succeeded') w.resolve(o.result === null ? {} : JSON.parse(o.result));
    else {
      const type = (o.error_type || 'host_error') as CommandError['type'];
      w.reject(new CommandError(type, o.error || `${w.kind} failed without a reason`, w.id));
    }
  }

  /**
   * Origin: what notifications did not say. Commands whose holder stopped fail now; rows older
   * than `minAgeMs` are read: finished ones settle, untaken ones are offered to the holder again.
   */
  async #poll(minAgeMs: number, live?: Set<string>): Promise<void> {
    const now = Date.now();
    const check: string[] = [];
    for (const w of [...this.#waiting.values()]) {
      if (live && !live.has(w.holder)) {
        this.#waiting.delete(w.id);
        const why = `${w.kind}: the control-plane replica holding host ${w.hostId}'s stream stopped`;
        w.reject(new CommandError('host_gone', why, w.id));
      } else if (now - w.at >= minAgeMs) check.push(w.id);
    }
    for (let i = 0; i < check.length; i += 200) {
      for (const o of await commandOutcomes(this.#db, check.slice(i, i + 200))) {
        const w = this.#waiting.get(o.id);
        if (!w) continue;
        if (o.finished) this.#settleFrom(o);
        else if (o.holder === '') this.#cluster.send(w.holder, { k: 'cmd', id: o.id, h: w.hostId });
      }
    }
  }

  /** Holder: an output frame from a host here for a follower of another replica (true if it was). */
  output(e: HostOutput): boolean {
    const key = `${e.hostId}/${e.frame.follow}`;
    const origin = this.#follows.get(key);
    if (!origin) return false;
    let f = e.frame;
    if (!e.admitted && (f.kind === 'stdout' || f.kind === 'stderr'))
      f = { kind: 'gap', follow: f.follow, from: f.seq, to: f.seq };
    if (f.kind === 'end') this.#follows.delete(key);
    this.#relay(origin, e.hostId, f);
    return true;
  }

  #relay(origin: string, hostId: string, f: OutputFrame): void {
    const b64 = encodeOutput(f).toString('base64');
    const n = Math.max(1, Math.ceil(b64.length / PIECE_CHARS));
    if (n > MAX_PIECES) return;
    for (let i = 0; i < n; i++)
      this.#cluster.send(origin, {
        k: 'out',
        h: hostId,
        f: f.follow,
        b: b64.slice(i * PIECE_CHARS, (i + 1) * PIECE_CHARS),
        i,
        n,
      });
  }

  /** Origin: one piece of a relayed output frame; a frame whose pieces are all here goes out. */
  #piece(from: string, m: Extract<Message, { k: 'out' }>): void {
    const key = `${from}/${m.h}/${m.f}`;
    // Pieces of one frame arrive in order on one connection; a frame missing one is dropped.
    const got = m.i === 0 ? [] : this.#pieces.get(key);
    this.#pieces.delete(key);
    if (!got || got.length !== m.i || m.n > MAX_PIECES) return;
    got.push(m.b);
    if (got.length < m.n) {
      this.#pieces.set(key, got);
      return;
    }
    let frameOut: OutputFrame;
    try {
      frameOut = decodeOutput(Buffer.from(got.join(''), 'base64'));
    } catch {
      return;
    }
    this.emit('output', { hostId: m.h, frame: frameOut, admitted: true });
  }
}
