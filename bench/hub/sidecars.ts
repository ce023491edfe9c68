// The simulated sidecars: N WebSocket clients in this one process, speaking the host stream
// protocol (sim-hosts.ts). Each joins with its token on the first connect and keeps its id and
// secret for the next.
// Driven by bench/hub/run.ts over the IPC channel; it never exits on its own.
import {
  type ConnectFigures,
  connectAll,
  dial,
  openCount,
  type SimHost,
  simStats,
  startHeartbeats,
} from './sim-hosts.ts';

export type ToSidecars =
  | { op: 'join'; url: string; tokens: string[]; concurrency: number }
  | { op: 'reconnect'; url: string; concurrency: number }
  | { op: 'stats' };

/** The join or the reconnect of every host; per-connection times are from dial to the hello reply. */
export type ConnectReport = { op: 'connected' } & Omit<ConnectFigures, 'times'>;

export interface SidecarStats {
  op: 'stats';
  open: number;
  heartbeats: number;
  commands: number;
  /** Streams the control plane closed after they were open (other than on our request). */
  drops: number;
}

export type FromSidecars = ConnectReport | SidecarStats | { op: 'ready' } | { op: 'hosts'; ids: string[] };

/** The close code of a control plane shutting down: expected when the benchmark restarts it. */
const GOING_AWAY = 1001;
const sims: SimHost[] = [];
let drops = 0;
const onDrop = (code: number) => {
  if (code !== GOING_AWAY) drops++;
};

function send(m: FromSidecars): void {
  process.send?.(m);
}

async function connectEach(url: string, concurrency: number, tokenOf: (i: number) => string) {
  const { times: _, ...figures } = await connectAll(sims, concurrency, (sim, i) =>
    dial(sim, url, tokenOf(i), { onDrop }),
  );
  return { op: 'connected' as const, ...figures };
}

process.on('message', async (m: ToSidecars) => {
  if (m.op === 'join') {
    sims.length = 0;
    for (const _ of m.tokens) sims.push({ ws: null, id: '', secret: '' });
    send(await connectEach(m.url, m.concurrency, (i) => m.tokens[i]));
    send({ op: 'hosts', ids: sims.map((s) => s.id) });
  } else if (m.op === 'reconnect') {
    for (const s of sims) s.ws = null; // the old streams are gone: the control plane restarted
    send(await connectEach(m.url, m.concurrency, (i) => sims[i].secret));
  } else if (m.op === 'stats') {
    send({ op: 'stats', open: openCount(sims), ...simStats, drops });
  }
});
process.on('disconnect', () => process.exit(0));
startHeartbeats(sims);
send({ op: 'ready' });
