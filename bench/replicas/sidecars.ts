// Simulated sidecars for several replicas: N WebSocket clients in this one process, each given the
// list of replica URLs starting at its own (host i first dials replica i % R), so the hosts spread
// evenly. When a stream drops, a host reconnects as svcd does (sidecar/link.ts): the same backoff
// (from 1 s, 25% jitter), each attempt on the next URL of its list. Every drop and the reconnect
// that ended it is recorded (wall clock, so the parent can compare with the moment it killed a
// replica). Commands are answered at once with an ack and a result, as in bench/hub/sidecars.ts.
// Driven over the IPC channel by bench/replicas/hub.ts; it never exits on its own.
import { WebSocket } from 'ws';
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, HEARTBEAT_INTERVAL_MS, STREAM_PATH } from '../../protocol/frames.ts';
import { backoff } from '../../sidecar/link.ts';
import { DEFAULT_CAPS, defaultHandlers } from '../../test/support/fake-sidecar.ts';
import { answerCommand } from '../hub/answer.ts';
import { pct, pool } from '../hub/measure.ts';

export type ToSidecars =
  | { op: 'join'; urls: string[]; tokens: string[]; concurrency: number }
  | { op: 'where' }
  | { op: 'drops'; since: number };

export interface Joined {
  op: 'joined';
  ok: number;
  failed: number;
  ms: number;
  p50: number;
  p99: number;
  errors: Record<string, number>;
}
/** Host ids and the replica index each host's stream is on now (-1: not connected). */
export interface Where {
  op: 'where';
  ids: string[];
  replica: number[];
}
/** Drops since `since` (epoch ms): the replica it was on, when it dropped, when it was back (0: not yet). */
export interface Drops {
  op: 'drops';
  drops: { id: string; from: number; at: number; up: number; to: number }[];
  open: number;
  commands: number;
  /** Failed reconnect attempts since the last join, by reason. */
  errors: Record<string, number>;
}
export type FromSidecars = Joined | Where | Drops | { op: 'ready' };

interface Sim {
  ws: WebSocket | null;
  id: string;
  secret: string;
  /** Index into urls of the replica the current (or last) session is on. */
  at: number;
  attempt: number;
  drop: { from: number; at: number; up: number; to: number } | null;
}

const SLOTS = 100;
const CAPS = JSON.stringify(DEFAULT_CAPS);
const sims: Sim[] = [];
let urls: string[] = [];
const stats = { commands: 0 };
const errors: Record<string, number> = {};

function send(m: FromSidecars): void {
  process.send?.(m);
}

/** Dials urls[idx], says hello and resolves once the control plane answers it. */
function connect(sim: Sim, idx: number, token: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(urls[idx] + STREAM_PATH, { perMessageDeflate: false, handshakeTimeout: 10_000 });
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
      sim.at = idx;
      sim.attempt = 0;
      hello = true;
      resolve();
    });
    ws.on('close', (code, reason) => {
      if (!hello) return reject(new Error(`closed ${code} ${reason.toString().slice(0, 80)}`));
      if (sim.ws !== ws) return;
      sim.ws = null;
      sim.drop = { from: sim.at, at: Date.now(), up: 0, to: -1 };
      void reconnect(sim);
    });
    ws.on('error', (err) => {
      if (!hello) reject(err);
    });
  });
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

function answer(ws: WebSocket, sim: Sim, f: Frame): void {
  if (f.type !== 'command') return;
  stats.commands++;
  const handler = defaultHandlers[f.kind as CommandKind];
  const outcome = handler
    ? `"ok":true,"payload":${JSON.stringify(handler(f, null as never) ?? {})}`
    : `"ok":false,"error":"unknown command kind"`;
  answerCommand(ws, sim.id, f.command_id, outcome);
}

async function joinAll(tokens: string[], concurrency: number): Promise<Joined> {
  const t0 = performance.now();
  const times: number[] = [];
  const errors: Record<string, number> = {};
  let ok = 0;
  await pool(sims, concurrency, async (sim, i) => {
    const c0 = performance.now();
    try {
      await connect(sim, i % urls.length, tokens[i]);
      ok++;
      times.push(performance.now() - c0);
    } catch (err) {
      const k = (err as Error).message.slice(0, 100);
      errors[k] = (errors[k] ?? 0) + 1;
    }
  });
  times.sort((a, b) => a - b);
  return {
    op: 'joined',
    ok,
    failed: sims.length - ok,
    ms: performance.now() - t0,
    p50: pct(times, 50),
    p99: pct(times, 99),
    errors,
  };
}

function startHeartbeats(): void {
  let slot = 0;
  setInterval(() => {
    const at = new Date().toISOString();
    for (let i = slot; i < sims.length; i += SLOTS) {
      const s = sims[i];
      if (!s.ws || s.ws.readyState !== WebSocket.OPEN) continue;
      s.ws.send(`{"type":"heartbeat","host_id":"${s.id}","sent_at":"${at}"}`);
    }
    slot = (slot + 1) % SLOTS;
  }, HEARTBEAT_INTERVAL_MS / SLOTS);
}

process.on('message', async (m: ToSidecars) => {
  if (m.op === 'join') {
    urls = m.urls;
    sims.length = 0;
    for (const _ of m.tokens) sims.push({ ws: null, id: '', secret: '', at: 0, attempt: 0, drop: null });
    send(await joinAll(m.tokens, m.concurrency));
  } else if (m.op === 'where') {
    send({ op: 'where', ids: sims.map((s) => s.id), replica: sims.map((s) => (s.ws ? s.at : -1)) });
  } else if (m.op === 'drops') {
    const drops = sims.flatMap((s) => (s.drop && s.drop.at >= m.since ? [{ id: s.id, ...s.drop }] : []));
    const open = sims.filter((s) => s.ws?.readyState === WebSocket.OPEN).length;
    send({ op: 'drops', drops, open, commands: stats.commands, errors });
  }
});
process.on('disconnect', () => process.exit(0));
startHeartbeats();
send({ op: 'ready' });
