// Followers of live processes on this control plane: each attached client is one follower id on
// its host's stream, so output frames (binary, decoded by the hub) reach exactly the clients that
// attached through that host, and a host can only ever write to its own followers. The buffer of
// output lives in the sidecar: a follower attaches with `since` and the sidecar replays before it
// follows, so a control-plane restart loses nothing a client cannot fetch again.
import { newId, PREFIX } from '../../protocol/ids.ts';
import type { ProcessInfo } from '../../protocol/processes.ts';
import type { CommandTarget, Dispatcher } from '../hosts/dispatcher.ts';
import type { HostGone, HostOutput } from '../hosts/hub-events.ts';
import type { FollowerSink } from './sink.ts';

/** How long a host has to answer an attach (its replay comes before the answer). */
export const ATTACH_TIMEOUT_MS = 30_000;

interface Follow {
  id: string;
  target: CommandTarget;
  envId: string;
  sink: FollowerSink;
  /** The output seq told so far (a frame or a gap), `since` at first. */
  last: number;
}

export class ProcessStreams {
  #dispatcher: Dispatcher;
  #log: { warn(obj: object, msg: string): void };
  /** By `<host>/<follower id>`. */
  #follows = new Map<string, Follow>();

  constructor(dispatcher: Dispatcher, log: { warn(obj: object, msg: string): void }) {
    this.#dispatcher = dispatcher;
    this.#log = log;
  }

  /** Followers attached now (metrics, tests). */
  get size(): number {
    return this.#follows.size;
  }

  /** An output frame from a host (the hub's `output`, or relayed by another replica); false: no follower here. */
  output(e: HostOutput): boolean {
    const key = `${e.hostId}/${e.frame.follow}`;
    const f = this.#follows.get(key);
    if (!f) return false;
    const fr = e.frame;
    // Relayed by another replica: frames lost on the way are a gap, told before what follows.
    if (e.after !== undefined) this.#caughtUp(f, e.after);
    switch (fr.kind) {
      case 'stdout':
      case 'stderr':
        if (e.admitted) f.sink.output(fr.kind, fr.seq, fr.data);
        else f.sink.gap(fr.seq, fr.seq);
        f.last = Math.max(f.last, fr.seq);
        return true;
      case 'gap':
        f.sink.gap(fr.from, fr.to);
        f.last = Math.max(f.last, fr.to);
        return true;
      case 'end':
        this.#follows.delete(key);
        f.sink.end(fr.end);
        return true;
    }
  }

  /** Another replica relayed a follower's output up to `after`: what did not arrive is a gap. */
  relayedTo(t: { hostId: string; follow: string; after: number }): void {
    const f = this.#follows.get(`${t.hostId}/${t.follow}`);
    if (f) this.#caughtUp(f, t.after);
  }

  #caughtUp(f: Follow, after: number): void {
    if (after <= f.last) return;
    f.sink.gap(f.last + 1, after);
    f.last = after;
  }

  /** A host's stream ended: its followers end now, saying why (they may attach again). */
  gone(g: HostGone): void {
    for (const [key, f] of [...this.#follows]) {
      if (f.target.hostId !== g.hostId) continue;
      this.#follows.delete(key);
      f.sink.end({
        exit_code: null,
        reason: `the host's stream dropped (${g.reason}); attach again to resume`,
      });
    }
  }

  /**
   * Attaches `sink` to `pid`: what the host still holds after `since` arrives first, then live
   * output, then `end`. Throws the host's refusal (unknown pid, too many followers).
   */
  async attach(
    target: CommandTarget,
    envId: string,
    pid: string,
    since: number,
    sink: FollowerSink,
  ): Promise<ProcessInfo> {
    const id = newId(PREFIX.follow);
    const key = `${target.hostId}/${id}`;
    const f: Follow = { id, target, envId, sink, last: Math.max(0, since) };
    this.#follows.set(key, f);
    sink.onClose = () => this.#closed(key, f);
    try {
      const r = await this.#dispatcher.run(
        target,
        envId,
        'proc.attach',
        { pid, follow: id, since },
        ATTACH_TIMEOUT_MS,
      );
      return r.process;
    } catch (err) {
      this.#follows.delete(key);
      throw err;
    }
  }

  /** The client went away (or its stream ended): the host stops sending to it. */
  #closed(key: string, f: Follow): void {
    if (this.#follows.get(key) !== f) return; // ended by the host: nothing to detach
    this.#follows.delete(key);
    this.#dispatcher
      .run(f.target, f.envId, 'proc.detach', { follow: f.id }, ATTACH_TIMEOUT_MS)
      .catch((err) =>
        this.#log.warn({ host: f.target.hostId, err: (err as Error).message }, 'detach failed'),
      );
  }

  /** Shutdown: every follower ends, told to attach again. */
  closeAll(reason: string): void {
    for (const [key, f] of [...this.#follows]) {
      this.#follows.delete(key);
      f.sink.end({ exit_code: null, reason });
    }
  }
}
