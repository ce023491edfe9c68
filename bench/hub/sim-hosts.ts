// What every simulated sidecar of the benchmarks does, whatever drives it: dial the host stream,
// say hello with a join token or a host secret, answer each command at once with an ack and a
// plausible result, and heartbeat from one shared scheduler (no timer per host). The hub
// benchmark's sidecars (one control plane) and the replicas benchmark's (several, with svcd's
// reconnect loop) differ only in what they do when a stream drops, so that is the caller's.
import { WebSocket } from 'ws';
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, HEARTBEAT_INTERVAL_MS, STREAM_PATH } from '../../protocol/frames.ts';
import { DEFAULT_CAPS, defaultHandlers } from '../../test/support/fake-sidecar.ts';
import { answerCommand } from './answer.ts';
import { pct, pool } from './measure.ts';

export interface SimHost {
  ws: WebSocket | null;
  id: string;
  secret: string;
}

export interface DialOptions {
  /** A dial that is not open within this long fails (default: ws's, none). */
  handshakeTimeoutMs?: number;
  /** A stream that said hello closed while it was still the host's current one (sim.ws is null by then). */
  onDrop?: (code: number) => void;
}

/** Counters shared by the simulated hosts of one process. */
export const simStats = { heartbeats: 0, commands: 0 };

const SLOTS = 100;
const CAPS = JSON.stringify(DEFAULT_CAPS);

/**
 * Dials `url`, says hello with `token` (a join token, or the host secret once it has an id) and
 * resolves once the control plane answers it; rejects with the reason otherwise.
 */
export function dial(sim: SimHost, url: string, token: string, opts: DialOptions = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url + STREAM_PATH, {
      perMessageDeflate: false,
      ...(opts.handshakeTimeoutMs ? { handshakeTimeout: opts.handshakeTimeoutMs } : {}),
    });
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
      if (!hello) return reject(new Error(`closed ${code} ${reason.toString().slice(0, 80)}`));
      if (sim.ws !== ws) return;
      sim.ws = null;
      opts.onDrop?.(code);
    });
    ws.on('error', (err) => {
      if (!hello) reject(err);
    });
  });
}

function answer(ws: WebSocket, sim: SimHost, f: Frame): void {
  if (f.type !== 'command') return;
  simStats.commands++;
  const handler = defaultHandlers[f.kind as CommandKind];
  const outcome = handler
    ? `"ok":true,"payload":${JSON.stringify(handler(f, null as never) ?? {})}`
    : `"ok":false,"error":"unknown command kind"`;
  answerCommand(ws, sim.id, f.command_id, outcome);
}

export interface ConnectFigures {
  ok: number;
  failed: number;
  ms: number;
  /** Per-connection time from dial to the hello reply, ms: each one, sorted, and two percentiles. */
  times: number[];
  p50: number;
  p99: number;
  errors: Record<string, number>;
}

/** Runs `connectOne` for every host, `concurrency` at a time, and times each. */
export async function connectAll<S extends SimHost>(
  sims: S[],
  concurrency: number,
  connectOne: (sim: S, i: number) => Promise<void>,
): Promise<ConnectFigures> {
  const t0 = performance.now();
  const times: number[] = [];
  const errors: Record<string, number> = {};
  let ok = 0;
  await pool(sims, concurrency, async (sim, i) => {
    const c0 = performance.now();
    try {
      await connectOne(sim, i);
      ok++;
      times.push(performance.now() - c0);
    } catch (err) {
      const k = (err as Error).message.slice(0, 100);
      errors[k] = (errors[k] ?? 0) + 1;
    }
  });
  times.sort((a, b) => a - b);
  return {
    ok,
    failed: sims.length - ok,
    ms: performance.now() - t0,
    times,
    p50: pct(times, 50),
    p99: pct(times, 99),
    errors,
  };
}

/** Host i heartbeats in slot i % SLOTS; one slot per tick, so a full round takes the interval. */
export function startHeartbeats(sims: SimHost[]): void {
  let slot = 0;
  setInterval(() => {
    const at = new Date().toISOString();
    for (let i = slot; i < sims.length; i += SLOTS) {
      const s = sims[i];
      if (!s.ws || s.ws.readyState !== WebSocket.OPEN) continue;
      s.ws.send(`{"type":"heartbeat","host_id":"${s.id}","sent_at":"${at}"}`);
      simStats.heartbeats++;
    }
    slot = (slot + 1) % SLOTS;
  }, HEARTBEAT_INTERVAL_MS / SLOTS);
}

/** The streams open now. */
export function openCount(sims: SimHost[]): number {
  return sims.filter((s) => s.ws?.readyState === WebSocket.OPEN).length;
}
