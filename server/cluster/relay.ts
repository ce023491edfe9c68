// Commands and process output between replicas, the command row as the truth. The origin (the
// replica a caller asked) records the row as always, then tells the replica holding the host's
// stream (`cmd`); the holder takes the row once (claimCommand: a command reaches a host at most
// once), writes it to the stream, stores the host's outcome on the row and tells the origin
// (`done`), which reads the row and answers its caller. Notifications may be lost: on every
// heartbeat the origin reads the rows it still waits for (settling the finished, telling the holder
// again of the untaken) and fails, as host_gone, what a holder that stopped was sending.
// Commands of one lane (a live process's input, resize and signal) sent through another replica
// keep their order there: the holder takes a lane's commands one at a time in the order their
// notifications came, and each notification names the origin's earlier commands of the lane not
// yet settled, which the holder takes first if their own notification was lost or is late.
// A process followed through this replica whose host is on another: output-relay.ts.
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, frame } from '../../protocol/frames.ts';
import { KeyedQueue } from '../../shared/concurrency.ts';
import { Emitter } from '../../shared/emitter.ts';
import type { Db } from '../db/types.ts';
import {
  type CommandOutcome,
  type CommandRow,
  claimCommand,
  claimCommands,
  commandOutcomes,
  finishCommand,
} from '../hosts/command-store.ts';
import { CommandError, type Pending, type RemoteHosts } from '../hosts/dispatcher.ts';
import type { HostGone, HostOutput } from '../hosts/hub-events.ts';
import { checkResult, MalformedResult } from '../hosts/result-check.ts';
import type { Cluster, Message } from './cluster.ts';
import { type Orphan, OutputRelay, type Tail } from './output-relay.ts';

/** A result or error this long at most rides in the `done` notification (longer: the row is read). */
const OUTCOME_IN_NOTIFICATION = 5_000;
/** Earlier unsettled commands of its lane a `cmd` notification names, at most (ids of ~30 bytes). */
const LANE_BEHIND = 32;

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
  /** A follower on a replica that died: its host should stop sending its output here. */
  orphan: Orphan;
  /** Where the output another replica relayed to a follower here ends. */
  tail: Tail;
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
  /** Origin side: per lane, its commands sent through other replicas and not settled, in order. */
  #lanes = new Map<string, string[]>();
  #laneOf = new Map<string, string>();
  /** Holder side: one lane's commands taken one at a time, in the order they were offered. */
  #takes = new KeyedQueue();
  #out: OutputRelay;
  /** Origin: commands settled from their finished row, until the dispatcher asks (finishedElsewhere). */
  #finished = new Set<string>();

  constructor(db: Db, cluster: Cluster, hub: HostWriter, log: { warn(obj: object, msg: string): void }) {
    super((err) => log.warn({ err }, 'relayed output handling failed'));
    this.#db = db;
    this.#cluster = cluster;
    this.#hub = hub;
    this.#out = new OutputRelay(
      cluster,
      (o) => this.emit('output', o),
      (o) => this.emit('orphan', o),
      (t) => this.emit('tail', t),
    );
    cluster.on('message', ({ from, m }) => this.#message(from, m));
    cluster.on('up', ({ hostId, replica }) => this.moved(hostId, replica));
    cluster.on('resync', () => this.#poll(0));
    cluster.replica.onTick(async (t) => {
      const { leaseMs, heartbeatMs } = cluster.replica.timing;
      this.#out.tick(
        t.dead.map((d) => d.id),
        t.live,
        leaseMs,
      );
      await this.#poll(heartbeatMs, t.live);
    });
  }

  /** Commands waiting on other replicas, and commands written here for others (tests, metrics). */
  get counts() {
    const [waiting, sending, lanes] = [this.#waiting.size, this.#sending.size, this.#lanes.size];
    return { waiting, sending, lanes, follows: this.#out.follows, assembling: this.#out.assembling };
  }

  forward(p: Pending): void {
    // Its place in its lane is taken now, in the order the dispatcher sends the lane's commands.
    if (p.lane) {
      const ids = this.#lanes.get(p.lane) ?? [];
      ids.push(p.id);
      this.#lanes.set(p.lane, ids);
      this.#laneOf.set(p.id, p.lane);
    }
    this.#cluster.holderOf(p.hostId).then(
      (holder) => {
        if (!holder)
          return p.reject(new CommandError('host_gone', `host ${p.hostId} is not connected`, p.id));
        const w = { ...p, holder, at: Date.now(), misses: 0 };
        this.#waiting.set(p.id, w);
        this.#offer(w);
      },
      (err) => p.reject(err as Error),
    );
  }

  /** Tells `w.holder` of the command; one of a lane names the lane's unsettled ones before it. */
  #offer(w: Waiting): void {
    const ids = w.lane ? (this.#lanes.get(w.lane) ?? []) : [];
    const at = ids.indexOf(w.id);
    const p = at > 0 ? ids.slice(Math.max(0, at - LANE_BEHIND), at) : [];
    this.#cluster.send(
      w.holder,
      w.lane ? { k: 'cmd', id: w.id, h: w.hostId, l: w.lane, p } : { k: 'cmd', id: w.id, h: w.hostId },
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
    const lane = this.#laneOf.get(id);
    if (lane === undefined) return;
    this.#laneOf.delete(id);
    const ids = (this.#lanes.get(lane) ?? []).filter((x) => x !== id);
    if (ids.length) this.#lanes.set(lane, ids);
    else this.#lanes.delete(lane);
  }

  async #message(from: string, m: Message): Promise<void> {
    switch (m.k) {
      case 'cmd':
        return m.l ? this.#takes.run(m.l, () => this.#take(from, m)) : this.#take(from, m);
      case 'done':
        return this.#settle(m);
      case 'miss':
        return this.#missed(from, m.id);
      case 'out':
        return this.#out.piece(from, m);
      case 'tail':
        return this.#out.tail(m);
    }
  }

  /**
   * Holder: takes the command (once) and writes it to the host's stream here. A replica without
   * the stream (the host moved on) leaves the row untaken and says so: the origin looks again.
   * One of a lane comes after the lane's earlier ones (one at a time, in turn); those the origin
   * named that nobody took yet (their notification lost or still on its way) are taken with it
   * and written first, in the lane's order.
   */
  async #take(origin: string, m: Extract<Message, { k: 'cmd' }>): Promise<void> {
    if (!this.#hub.isConnected(m.h)) {
      this.#cluster.send(origin, { k: 'miss', id: m.id });
      return;
    }
    const order = [...(m.p ?? []).slice(-LANE_BEHIND), m.id];
    const rows = await claimCommands(this.#db, order, m.h, this.#cluster.id);
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of order) {
      const row = byId.get(id);
      if (row) await this.#write(origin, row);
    }
  }

  /** Holder: a command taken for `origin`, written to its host's stream here. */
  async #write(
    origin: string,
    row: Pick<CommandRow, 'id' | 'host_id' | 'env_id' | 'team_id' | 'kind' | 'payload'>,
  ): Promise<void> {
    const { id, host_id: hostId } = row;
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
    this.#out.taken(origin, row, payload);
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
    this.#out.gone(e.hostId, e.reason);
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
      this.#offer(w);
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
        else if (o.holder === '') this.#offer(w);
      }
    }
  }

  /** Holder: an output frame from a host here for a follower of another replica (true if it was). */
  output(e: HostOutput): boolean {
    return this.#out.output(e);
  }
}
