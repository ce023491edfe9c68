// Process output between replicas: a client follows a process through one replica (the origin)
// while the host's stream is on another (the holder). The holder sends each output frame to the
// origin in notification-sized pieces. Notifications may be lost (a failed batch, the origin's
// listening connection reconnecting), so every piece says where the holder's previous frame for
// that follower ended (`a`, a process output seq): the origin compares it with what its follower
// last got and tells the client a `gap` for what never arrived, as a lagging client on one replica
// is told; bytes never go missing silently. A loss with nothing after it is told too: for a while
// after its output changed, each heartbeat sends the follower's replica a `tail` (where the output
// relayed so far ends), and an `end` is sent once more a heartbeat later (the origin takes the
// first that arrives). A follower whose replica died is detached on the host.
import { decodeOutput, encodeOutput, type OutputFrame } from '../../protocol/processes.ts';
import type { CommandTarget } from '../hosts/dispatcher.ts';
import type { HostOutput } from '../hosts/hub-events.ts';
import type { Cluster, Message } from './cluster.ts';

/** Base64 characters of an output frame per notification (with its envelope, under 7 KB). */
const PIECE_CHARS = 6_000;
/** Pieces of one frame, at most (a frame past it is relayed as a gap). */
export const MAX_PIECES = 64;

/** A follower on another replica of a process on a host here. */
interface Follow {
  origin: string;
  target: CommandTarget;
  envId: string;
  /** The output seq the frames relayed so far end at (the attach's `since` at first). */
  last: number;
  /** When it attached (a replica younger than a lease may not be in the live set yet). */
  at: number;
  /** Heartbeats that still send a `tail` (set again each time its output moves on). */
  tails: number;
}

/** Heartbeats a follower's `tail` is sent after its output last moved on (one may be lost). */
const TAILS = 2;

/** Where the output relayed to a follower so far ends (`after`, a seq). */
export interface Tail {
  hostId: string;
  follow: string;
  after: number;
}

/** A follower on another replica whose host must stop sending to it. */
export interface Orphan {
  target: CommandTarget;
  envId: string;
  follow: string;
}

export class OutputRelay {
  #cluster: Cluster;
  #emit: (o: HostOutput) => void;
  #orphan: (o: Orphan) => void;
  /** Holder side: followers of another replica on a host here, by `<host>/<follower>`. */
  #follows = new Map<string, Follow>();
  /** Holder side: `end`s relayed since the last heartbeat, and those of the one before (sent again). */
  #ended: { fl: Follow; hostId: string; f: OutputFrame }[] = [];
  #endedBefore: { fl: Follow; hostId: string; f: OutputFrame }[] = [];
  /** Origin side: frames arriving in pieces, by `<replica>/<host>/<follower>`, with when they began. */
  #pieces = new Map<string, { got: string[]; at: number }>();
  #behind: (t: Tail) => void;

  constructor(
    cluster: Cluster,
    emit: (o: HostOutput) => void,
    orphan: (o: Orphan) => void,
    behind: (t: Tail) => void,
  ) {
    this.#cluster = cluster;
    this.#emit = emit;
    this.#orphan = orphan;
    this.#behind = behind;
  }

  get follows(): number {
    return this.#follows.size;
  }

  /** Frames being put together (tests: bounded). */
  get assembling(): number {
    return this.#pieces.size;
  }

  /** Holder: an attach or detach written to a host here for `origin`. */
  taken(
    origin: string,
    row: { host_id: string; team_id: string; env_id: string; kind: string },
    payload: Record<string, unknown>,
  ): void {
    const key = `${row.host_id}/${payload.follow}`;
    if (row.kind === 'proc.detach') this.#follows.delete(key);
    if (row.kind !== 'proc.attach') return;
    const since = typeof payload.since === 'number' && payload.since > 0 ? payload.since : 0;
    const target = { hostId: row.host_id, teamId: row.team_id, kind: 'sidecar' };
    this.#follows.set(key, { origin, target, envId: row.env_id, last: since, at: Date.now(), tails: 0 });
  }

  /** Holder: an output frame from a host here for a follower of another replica (true if it was). */
  output(e: HostOutput): boolean {
    const key = `${e.hostId}/${e.frame.follow}`;
    const fl = this.#follows.get(key);
    if (!fl) return false;
    let f = e.frame;
    if (!e.admitted && (f.kind === 'stdout' || f.kind === 'stderr'))
      f = { kind: 'gap', follow: f.follow, from: f.seq, to: f.seq };
    if (f.kind === 'end') this.#follows.delete(key);
    this.#relay(fl, e.hostId, f);
    if (f.kind === 'end') this.#ended.push({ fl, hostId: e.hostId, f });
    return true;
  }

  /** Holder: the host's stream here dropped: its relayed followers end, told why. */
  gone(hostId: string, reason: string): void {
    for (const [key, fl] of [...this.#follows]) {
      if (!key.startsWith(`${hostId}/`)) continue;
      this.#follows.delete(key);
      const why = `the host's stream dropped (${reason}); attach again to resume`;
      const f: OutputFrame = {
        kind: 'end',
        follow: key.slice(hostId.length + 1),
        end: { exit_code: null, reason: why },
      };
      this.#relay(fl, hostId, f);
      this.#ended.push({ fl, hostId, f });
    }
  }

  /**
   * Each heartbeat: followers of replicas that died (found dead now, or missing from the live ones
   * for longer than a lease: another replica may have buried it) are detached on their host, else
   * it would send their output here until the process ends; frames whose pieces stopped coming
   * are dropped (the next frame's `a`, or a `tail`, tells the gap). Tails and repeated ends go out.
   */
  tick(dead: readonly string[], live: ReadonlySet<string>, leaseMs: number): void {
    const gone = new Set(dead);
    const before = Date.now() - leaseMs;
    for (const [key, fl] of [...this.#follows]) {
      if (!gone.has(fl.origin) && (live.has(fl.origin) || fl.at > before)) continue;
      this.#follows.delete(key);
      this.#orphan({ target: fl.target, envId: fl.envId, follow: key.slice(fl.target.hostId.length + 1) });
    }
    for (const [key, p] of [...this.#pieces]) if (p.at <= before) this.#pieces.delete(key);
    for (const [key, fl] of this.#follows) {
      if (fl.tails <= 0) continue;
      fl.tails--;
      const follow = key.slice(fl.target.hostId.length + 1);
      this.#cluster.send(fl.origin, { k: 'tail', h: fl.target.hostId, f: follow, a: fl.last });
    }
    for (const e of this.#endedBefore) this.#relay(e.fl, e.hostId, e.f);
    this.#endedBefore = this.#ended;
    this.#ended = [];
  }

  /** Origin: where the output a holder relayed to a follower here ends (a gap if it is ahead). */
  tail(m: Extract<Message, { k: 'tail' }>): void {
    this.#behind({ hostId: m.h, follow: m.f, after: m.a });
  }

  #relay(fl: Follow, hostId: string, frame: OutputFrame): void {
    let f = frame;
    const a = fl.last;
    if (f.kind === 'stdout' || f.kind === 'stderr') fl.last = Math.max(fl.last, f.seq);
    if (f.kind === 'gap') fl.last = Math.max(fl.last, f.to);
    if (fl.last !== a) fl.tails = TAILS;
    let b64 = encodeOutput(f).toString('base64');
    if (Math.ceil(b64.length / PIECE_CHARS) > MAX_PIECES && (f.kind === 'stdout' || f.kind === 'stderr')) {
      f = { kind: 'gap', follow: f.follow, from: f.seq, to: f.seq };
      b64 = encodeOutput(f).toString('base64');
    }
    const n = Math.max(1, Math.ceil(b64.length / PIECE_CHARS));
    for (let i = 0; i < n; i++)
      this.#cluster.send(fl.origin, {
        k: 'out',
        h: hostId,
        f: f.follow,
        b: b64.slice(i * PIECE_CHARS, (i + 1) * PIECE_CHARS),
        i,
        n,
        a,
      });
  }

  /** Origin: one piece of a relayed output frame; a frame whose pieces are all here goes out. */
  piece(from: string, m: Extract<Message, { k: 'out' }>): void {
    const key = `${from}/${m.h}/${m.f}`;
    // Pieces of one frame arrive in order on one connection; a frame missing one is dropped, and
    // the gap it leaves is told with the next frame (its `a`).
    const got = m.i === 0 ? { got: [], at: Date.now() } : this.#pieces.get(key);
    this.#pieces.delete(key);
    if (!got || got.got.length !== m.i || m.n > MAX_PIECES) return;
    got.got.push(m.b);
    if (got.got.length < m.n) {
      this.#pieces.set(key, got);
      return;
    }
    let frameOut: OutputFrame;
    try {
      frameOut = decodeOutput(Buffer.from(got.got.join(''), 'base64'));
    } catch {
      return;
    }
    this.#emit({
      hostId: m.h,
      frame: frameOut,
      admitted: true,
      after: typeof m.a === 'number' ? m.a : undefined,
    });
  }
}
