// The simulated sidecars: N WebSocket clients in this one process, speaking the host stream
// protocol. Each joins with its token on the first connect and keeps its id and secret for the
// next. One shared scheduler spreads heartbeats over the 10 s interval (no timer per host), and
// every command is answered at once with an ack and a plausible result.
// Driven by bench/hub/run.ts over the IPC channel; it never exits on its own.
import { WebSocket } from 'ws';
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, HEARTBEAT_INTERVAL_MS, STREAM_PATH } from '../../protocol/frames.ts';
import { DEFAULT_CAPS, defaultHandlers } from '../../test/support/fake-sidecar.ts';
import { answerCommand } from './answer.ts';
import { pct, pool } from './measure.ts';

export type ToSidecars =
  | { op: 'join'; url: string; tokens: string[]; concurrency: number }
  | { op: 'reconnect'; url: string; concurrency: number }
  | { op: 'stats' };

export interface ConnectReport {
  op: 'connected';
  ok: number;
  failed: number;
  ms: number;
  /** Per-connection time from dial to the hello reply, ms. */
  p50: number;
  p99: number;
  errors: Record<string, number>;
}

export interface SidecarStats {
  op: 'stats';
  open: number;
  heartbeats: number;
  commands: number;
  /** Streams the control plane closed after they were open (other than on our request). */
  drops: number;
}

export type FromSidecars = ConnectReport | SidecarStats | { op: 'ready' } | { op: 'hosts'; ids: string[] };

interface Sim {
  ws: WebSocket | null;
  id: string;
  secret: string;
}

const SLOTS = 100;
/** The close code of a control plane shutting down: expected when the benchmark restarts it. */
const GOING_AWAY = 1001;
const sims: Sim[] = [];
const stats = { heartbeats: 0, commands: 0, drops: 0 };
const CAPS = JSON.stringify(DEFAULT_CAPS);

function send(m: FromSidecars): void {
  process.send?.(m);
}

/** Dials, says hello and resolves once the control plane answers it; rejects with the reason. */
function connect(sim: Sim, url: string, token: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url + STREAM_PATH, { perMessageDeflate: false });
    let hello = false;
    ws.on('open', () => {
      const payload = `{"host_id":${JSON.stringify(sim.id)},"token":${JSON.stringify(token)},"capabilities":${CAPS}}`;
      ws.send(
        `{"type":"hello","host_id":${JSON.stringify(sim.id)},"payload":${payload},"sent_at":"${new Date().toISOString()}"}`,
      );
    });
    ws.on('message', (data: Buffer) => {
      const f = JSON.parse(data.toString()) as Frame;
      if (hello) return answer(ws, sim, f);
      if (f.type !== 'hello') return;
      const p = f.payload as { host_id: string; secret?: string };
      sim.id = p.host_id;
      if (p.secret) sim.secret = p.secret;
      sim.ws = ws;
      hello = true;
      resolve();
    });
    ws.on('close', (code, reason) => {
      if (sim.ws === ws) {
        sim.ws = null;
        if (code !== GOING_AWAY) stats.drops++;
      }
      if (!hello) reject(new Error(`closed ${code} ${reason.toString().slice(0, 80)}`));
    });
    ws.on('error', (err) => {
      if (!hello) reject(err);
    });
  });
}

function answer(ws: WebSocket, sim: Sim, f: Frame): void {
  if (f.type !== 'command') return;
  stats.commands++;
  const handler = defaultHandlers[f.kind as CommandKind];
  const outcome = handler
    ? `"ok":true,"payload":${JSON.stringify(handler(f, null as never) ?? {})}`
    : `"ok":false,"error":"unknown command kind"`;
  answerCommand(ws, sim.id, f.command_id, outcome);
}

async function connectAll(
  url: string,
  concurrency: number,
  tokenOf: (i: number) => string,
): Promise<ConnectReport> {
  const t0 = performance.now();
  const times: number[] = [];
  const errors: Record<string, number> = {};
  let ok = 0;
  await pool(sims, concurrency, async (sim, i) => {
    const c0 = performance.now();
    try {
      await connect(sim, url, tokenOf(i));
      ok++;
      times.push(performance.now() - c0);
    } catch (err) {
      const k = (err as Error).message.slice(0, 100);
      errors[k] = (errors[k] ?? 0) + 1;
    }
  });
  times.sort((a, b) => a - b);
  return {
    op: 'connected',
    ok,
    failed: sims.length - ok,
    ms: performance.now() - t0,
    p50: pct(times, 50),
    p99: pct(times, 99),
    errors,
  };
}

/** Host i heartbeats in slot i % SLOTS; one slot per tick, so a full round takes the interval. */
function startHeartbeats(): void {
  let slot = 0;
  setInterval(() => {
    const at = new Date().toISOString();
    for (let i = slot; i < sims.length; i += SLOTS) {
      const s = sims[i];
      if (!s.ws || s.ws.readyState !== WebSocket.OPEN) continue;
      s.ws.send(`{"type":"heartbeat","host_id":"${s.id}","sent_at":"${at}"}`);
      stats.heartbeats++;
    }
    slot = (slot + 1) % SLOTS;
  }, HEARTBEAT_INTERVAL_MS / SLOTS);
}

process.on('message', async (m: ToSidecars) => {
  if (m.op === 'join') {
    sims.length = 0;
    for (const _ of m.tokens) sims.push({ ws: null, id: '', secret: '' });
    const report = await connectAll(m.url, m.concurrency, (i) => m.tokens[i]);
    send(report);
    send({ op: 'hosts', ids: sims.map((s) => s.id) });
  } else if (m.op === 'reconnect') {
    for (const s of sims) s.ws = null; // the old streams are gone: the control plane restarted
    send(await connectAll(m.url, m.concurrency, (i) => sims[i].secret));
  } else if (m.op === 'stats') {
    const open = sims.filter((s) => s.ws?.readyState === WebSocket.OPEN).length;
    send({ op: 'stats', open, ...stats });
  }
});
process.on('disconnect', () => process.exit(0));
startHeartbeats();
send({ op: 'ready' });
