// How a simulated sidecar answers a command: an ack and a result, as svcd does (spec "Command
// lifecycle"), written as text: the sidecars' process answers thousands a second on a core it
// shares with the load. Used by sidecars.ts and by the ws floor's clients (floor-peers.ts), so
// the floor receives the same frames as the control plane.
import type { WebSocket } from 'ws';

/** Sends the ack and the result; `outcome` is `"ok":true,"payload":{…}` or `"ok":false,"error":"…"`. */
export function answerCommand(ws: WebSocket, hostId: string, commandId: unknown, outcome: string): void {
  const at = new Date().toISOString();
  const id = JSON.stringify(commandId);
  ws.send(`{"type":"ack","host_id":"${hostId}","command_id":${id},"sent_at":"${at}"}`);
  ws.send(`{"type":"result","host_id":"${hostId}","command_id":${id},${outcome},"sent_at":"${at}"}`);
}
