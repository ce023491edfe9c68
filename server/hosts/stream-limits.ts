// Limits of the host stream beyond the 16 MiB frame: what a socket may send before its hello is
// accepted (an unknown peer may not make the hub buffer a large frame), how large and how frequent
// a host's event frames may be (one host may not flood the event log), and the close code of every
// refusal, 1008.
import { WebSocket } from 'ws';
import { type Frame, POLICY_VIOLATION } from '../../protocol/frames.ts';
import type { OutputFrame } from '../../protocol/processes.ts';

/** Bytes a socket may send before its hello is accepted: the hello only. */
export const PRE_HELLO_MAX_BYTES = 64 * 1024;
/** A refused handshake gets its 1008 close frame, then the socket is cut after this. */
export const REFUSED_LINGER_MS = 500;
/** Event frames: body size, and a per-host token bucket (burst, then a steady rate). */
export const MAX_EVENT_BYTES = 64 * 1024;
export const EVENT_BURST = 100;
export const EVENTS_PER_SEC = 20;
/** Progress lines are stored as events; a longer line is cut. */
export const MAX_PROGRESS_CHARS = 4096;

/**
 * ws closes a frame it cannot take (over 16 MiB: 1009, bad UTF-8: 1007, protocol error: 1002)
 * with its own code; the spec's rule is 1008 for every refusal, which a sidecar treats as fatal.
 */
export class StreamSocket extends WebSocket {
  override close(code?: number, data?: string | Buffer): void {
    if (code === 1002 || code === 1003 || code === 1007 || code === 1009) {
      super.close(POLICY_VIOLATION, code === 1009 ? 'frame larger than 16 MiB' : 'malformed frame');
      return;
    }
    super.close(code, data);
  }
}

export interface EventBucket {
  eventTokens: number;
  eventRefillAt: number;
}

/** Why an event frame is not stored (too frequent, too large, malformed), or '' to store it. */
export function admitEvent(c: EventBucket, f: Frame): string {
  const at = Date.now();
  c.eventTokens = Math.min(EVENT_BURST, c.eventTokens + ((at - c.eventRefillAt) / 1000) * EVENTS_PER_SEC);
  c.eventRefillAt = at;
  const kind = f.kind || 'event';
  const body = JSON.stringify(f.payload ?? null);
  if (c.eventTokens < 1) return `more than ${EVENTS_PER_SEC} events a second`;
  if (body.length > MAX_EVENT_BYTES) return `an event body over ${MAX_EVENT_BYTES} bytes`;
  // Postgres refuses NUL in TEXT and \u0000 in JSON text it reads back.
  if (kind.length > 100 || kind.includes('\0') || body.includes('\\u0000')) return 'a malformed event';
  c.eventTokens -= 1;
  return '';
}

/**
 * Process output (binary frames), a budget apart from events: per host, a token bucket of bytes and
 * one of frames. Output over it is dropped and its followers see a `gap`; a gap or an end frame is
 * always let through (they are small, and a follower must learn where output was lost and that it ended).
 */
export const OUTPUT_BYTES_PER_SEC = 256 * 1024 * 1024;
export const OUTPUT_BYTES_BURST = 64 * 1024 * 1024;
export const OUTPUT_FRAMES_PER_SEC = 20_000;
export const OUTPUT_FRAMES_BURST = 40_000;

export interface OutputBudget {
  outBytes: number;
  outFrames: number;
  outRefillAt: number;
  outputDropped: number;
}

export const newOutputBudget = (at: number): OutputBudget => ({
  outBytes: OUTPUT_BYTES_BURST,
  outFrames: OUTPUT_FRAMES_BURST,
  outRefillAt: at,
  outputDropped: 0,
});

/** True when the frame fits the host's output budget (and is counted against it). */
export function admitOutput(c: OutputBudget, f: OutputFrame): boolean {
  const at = Date.now();
  const dt = (at - c.outRefillAt) / 1000;
  c.outRefillAt = at;
  c.outBytes = Math.min(OUTPUT_BYTES_BURST, c.outBytes + dt * OUTPUT_BYTES_PER_SEC);
  c.outFrames = Math.min(OUTPUT_FRAMES_BURST, c.outFrames + dt * OUTPUT_FRAMES_PER_SEC);
  if (f.kind === 'gap' || f.kind === 'end') {
    c.outFrames -= 1;
    return true;
  }
  if (c.outFrames < 1 || c.outBytes < f.data.length) return false;
  c.outFrames -= 1;
  c.outBytes -= f.data.length;
  return true;
}
