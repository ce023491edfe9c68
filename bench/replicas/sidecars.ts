// Simulated sidecars for several replicas: a share of the hosts as WebSocket clients in this one
// process (bench/replicas/sidecar-procs.ts starts several, so no process needs a descriptor per
// host of the whole run), each given the list of replica URLs starting at its own (host i of the
// run dials replica i % R first), so the hosts spread evenly. When a stream drops, a host
// reconnects as svcd does (sidecar/link.ts): the same backoff (from 1 s, 25% jitter), each attempt
// on the next URL of its list. Every drop and the reconnect that ended it is recorded (wall clock,
// so the parent can compare with the moment it killed a replica). Streams, hellos, commands and
// heartbeats are those of bench/hub/sim-hosts.ts.
// Driven over the IPC channel by bench/replicas/hub.ts; it never exits on its own.
import { backoff } from '../../sidecar/link.ts';
import { connectAll, dial, openCount, type SimHost, simStats, startHeartbeats } from '../hub/sim-hosts.ts';

export type ToSidecars =
  /** `first`: the run-wide index of this process's first host (host i dials replica i % R first). */
  | { op: 'join'; urls: string[]; tokens: string[]; first: number; concurrency: number }
  | { op: 'where' }
  | { op: 'drops'; since: number };

export interface Joined {
  op: 'joined';
  ok: number;
  failed: number;
  ms: number;
  /** Each join's time from dial to the hello reply, ms, sorted. */
  times: number[];
  errors: Record<string, number>;
}
/** Host ids and the replica index each host's stream is on now (-1: not connected). */
export interface Where {
  op: 'where';
  ids: string[];
  replica: number[];
}
export interface Drop {
  id: string;
  /** The replica it was on, when it dropped, when it was back (0: not yet) and where. */
  from: number;
  at: number;
  up: number;
  to: number;
}
/** Drops since `since` (epoch ms). */
export interface Drops {
  op: 'drops';
  drops: Drop[];
  open: number;
  commands: number;
  /** Failed reconnect attempts since the last join, by reason. */
  errors: Record<string, number>;
}
export type FromSidecars = Joined | Where | Drops | { op: 'ready' };

interface Sim extends SimHost {
  /** Index into urls of the replica the current (or last) session is on. */
  at: number;
  attempt: number;
  drop: Omit<Drop, 'id'> | null;
}

const sims: Sim[] = [];
let urls: string[] = [];
const errors: Record<string, number> = {};

function send(m: FromSidecars): void {
  process.send?.(m);
}

/** Dials urls[idx] and says hello; on the hello reply the session is on that replica. */
async function connect(sim: Sim, idx: number, token: string): Promise<void> {
  await dial(sim, urls[idx], token, {
    handshakeTimeoutMs: 10_000,
    onDrop: () => {
      sim.drop = { from: sim.at, at: Date.now(), up: 0, to: -1 };
      void reconnect(sim);
    },
  });
  sim.at = idx;
  sim.attempt = 0;
}

/** svcd's loop: wait the backoff, try the next URL; again until a session is up. */
async function reconnect(sim: Sim): Promise<void> {
  let idx = sim.at;
  for (;;) {
    await new Promise((r) => setTimeout(r, backoff(sim.attempt++)));
    idx = (idx + 1) % urls.length;
    try {
      await connect(sim, idx, sim.secret);
      if (sim.drop) {
        sim.drop.up = Date.now();
        sim.drop.to = idx;
      }
      return;
    } catch (err) {
      // Refused or dead: the next URL after the next backoff.
      const k = `${idx}: ${(err as Error).message.slice(0, 80)}`;
      if (k in errors || Object.keys(errors).length < 12) errors[k] = (errors[k] ?? 0) + 1;
    }
  }
}

process.on('message', async (m: ToSidecars) => {
  if (m.op === 'join') {
    urls = m.urls;
    sims.length = 0;
    for (const _ of m.tokens) sims.push({ ws: null, id: '', secret: '', at: 0, attempt: 0, drop: null });
    const r = await connectAll(sims, m.concurrency, (sim, i) =>
      connect(sim, (m.first + i) % urls.length, m.tokens[i]),
    );
    send({ op: 'joined', ok: r.ok, failed: r.failed, ms: r.ms, times: r.times, errors: r.errors });
  } else if (m.op === 'where') {
    send({ op: 'where', ids: sims.map((s) => s.id), replica: sims.map((s) => (s.ws ? s.at : -1)) });
  } else if (m.op === 'drops') {
    const drops = sims.flatMap((s) => (s.drop && s.drop.at >= m.since ? [{ id: s.id, ...s.drop }] : []));
    send({ op: 'drops', drops, open: openCount(sims), commands: simStats.commands, errors });
  }
});
process.on('disconnect', () => process.exit(0));
startHeartbeats(sims);
send({ op: 'ready' });
