// One host's stream as the hub keeps it (its limits' state beside the socket), and how the hub
// refuses a stream: the 1008 close, then the cut.
import type { Duplex } from 'node:stream';
import { WebSocket } from 'ws';
import { POLICY_VIOLATION } from '../../protocol/frames.ts';
import { guard } from '../../shared/faults.ts';
import { EVENT_BURST, newOutputBudget, type OutputBudget, REFUSED_LINGER_MS } from './stream-limits.ts';

export interface Conn extends OutputBudget {
  ws: WebSocket;
  hostId: string;
  teamId: string;
  cloudId: string;
  lastFrameAt: number;
  /** Event-frame tokens left and when they were last refilled (a host may not flood the log). */
  eventTokens: number;
  eventRefillAt: number;
  dropped: number;
}

/**
 * A stream whose hello was accepted. `located`: the hello also wrote which replica holds it;
 * `current`: the hello's capabilities are those already recorded.
 */
export interface Admitted {
  c: Conn;
  located: boolean;
  current: boolean;
}

export function newConn(ws: WebSocket, hostId: string, teamId: string, cloudId: string): Conn {
  const at = Date.now();
  return {
    ws,
    hostId,
    teamId,
    cloudId,
    lastFrameAt: at,
    eventTokens: EVENT_BURST,
    eventRefillAt: at,
    dropped: 0,
    ...newOutputBudget(at),
  };
}

/** A refusal before the hello: the 1008 close frame goes out, reading stops, the socket is cut. */
export function refuseHandshake(ws: WebSocket, socket: Duplex, reason: string): void {
  refuse(ws, reason);
  socket.pause();
  setTimeout(
    guard('host streams: cut a refused stream', () => ws.terminate()),
    REFUSED_LINGER_MS,
  ).unref();
}

export function refuse(ws: WebSocket, reason: string): void {
  if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) {
    // Close reasons are limited to 123 bytes by the WebSocket protocol.
    ws.close(POLICY_VIOLATION, Buffer.from(reason).subarray(0, 123).toString());
  }
}
