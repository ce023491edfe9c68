// The one outbound WebSocket to the control plane (spec "Session rules"). Hello with the join
// token the first time, with host id and secret after; heartbeat every 10 s; reconnect with
// backoff from 1 s to 30 s (with jitter) when the stream drops; a 1008 close is fatal. With several
// control-plane URLs (replicas reached without a load balancer), each reconnect tries the next one,
// so a replica that died is left for a live one at the first retry.
import { WebSocket } from 'ws';
import type { Capabilities } from '../protocol/commands.ts';
import {
  type Frame,
  type FrameError,
  frame,
  HEARTBEAT_INTERVAL_MS,
  MAX_FRAME_BYTES,
  POLICY_VIOLATION,
  parseFrame,
  STREAM_PATH,
} from '../protocol/frames.ts';
import { parseHelloReply } from '../protocol/hello.ts';
import { backoff as expBackoff, sleep } from '../shared/concurrency.ts';
import { guard } from '../shared/faults.ts';

export class Refused extends Error {}

export interface LinkOptions {
  /** A control-plane URL, or several separated by commas (tried in turn). */
  server: string;
  identity: () => { host_id: string; secret: string } | null;
  token: string;
  capabilities: () => Promise<Capabilities>;
  onIdentity: (hostId: string, secret: string) => void;
  onCommand: (f: Frame) => void;
  /** The stream closed: whatever followed its frames is gone with it. */
  onClosed?: () => void;
  log: (msg: string) => void;
}

export type LinkState = 'connecting' | 'connected' | 'backoff' | 'stopped';

export const streamUrl = (server: string) => server.replace(/^http/, 'ws').replace(/\/+$/, '') + STREAM_PATH;

export class Link {
  state: LinkState = 'connecting';
  #o: LinkOptions;
  #ws: WebSocket | null = null;
  #attempt = 0;
  /** Which of the control-plane URLs the next session tries. */
  #next = 0;
  #stop = false;
  /** Aborted by stop(): ends a reconnect wait at once. */
  #stopped = new AbortController();

  constructor(o: LinkOptions) {
    this.#o = o;
  }

  /** Sends on the current stream; frames are dropped while disconnected (results stay on disk). */
  send(f: Frame): void {
    if (this.#ws?.readyState === WebSocket.OPEN) this.#ws.send(JSON.stringify(f));
  }

  /** Sends a binary frame (process output) on the current stream; false while disconnected. */
  sendBinary(data: Buffer): boolean {
    if (this.#ws?.readyState !== WebSocket.OPEN) return false;
    this.#ws.send(data, { binary: true });
    return true;
  }

  /** Bytes queued on the current stream, not yet written (0 without one). */
  buffered(): number {
    return this.#ws?.bufferedAmount ?? 0;
  }

  /** Runs until stopped; rejects with Refused on a 1008 close. */
  async run(): Promise<void> {
    while (!this.#stop) {
      this.state = 'connecting';
      const outcome = await this.#session();
      if (outcome.code === POLICY_VIOLATION) {
        this.state = 'stopped';
        throw new Refused(outcome.reason || 'refused by the control plane');
      }
      if (this.#stop) break;
      this.state = 'backoff';
      const delay = backoff(this.#attempt++);
      this.#o.log(
        `stream closed (${outcome.code} ${outcome.reason}); reconnecting in ${(delay / 1000).toFixed(1)} s`,
      );
      await sleep(delay, this.#stopped.signal);
    }
    this.state = 'stopped';
  }

  /** The URL for the next session: the list's next one each time (one URL: always that one). */
  #server(): string {
    const urls = this.#o.server.split(',');
    return urls[this.#next++ % urls.length];
  }

  #session(): Promise<{ code: number; reason: string }> {
    const server = this.#server();
    return new Promise((resolve) => {
      const ws = new WebSocket(streamUrl(server), {
        maxPayload: MAX_FRAME_BYTES,
        perMessageDeflate: false,
        handshakeTimeout: 15_000,
        // Masking guards browsers' traffic against caching proxies; svcd is no browser, and a zero
        // mask lets ws skip XORing every byte of process output it sends.
        generateMask: (mask: Buffer) => {
          mask.fill(0);
        },
      });
      this.#ws = ws;
      let beat: NodeJS.Timeout | undefined;
      // A throw in handling the stream (a state file that cannot be written, a bug) is logged and
      // counted; it never takes the sidecar and every stack it serves down.
      ws.on(
        'open',
        guard('stream: open', async () => {
          const id = this.#o.identity();
          const capabilities = await this.#o.capabilities().catch(() => ({}) as Capabilities);
          const hello = { host_id: id?.host_id ?? '', token: id ? id.secret : this.#o.token, capabilities };
          if (!id && !this.#o.token) return ws.close(POLICY_VIOLATION, 'no saved identity and no join token');
          ws.send(JSON.stringify(frame('hello', { host_id: hello.host_id, payload: hello })));
        }),
      );
      ws.on(
        'message',
        guard('stream: frame', (data: WebSocket.RawData) => {
          let f: Frame;
          try {
            f = parseFrame(data.toString());
          } catch (err) {
            this.#o.log(`ignoring a bad frame: ${(err as FrameError).message}`);
            return;
          }
          if (f.type === 'hello') {
            const p = parseHelloReply(f.payload);
            if (p.host_id && p.secret) this.#o.onIdentity(p.host_id, p.secret);
            this.state = 'connected';
            this.#attempt = 0;
            this.#o.log(`connected to ${server} as ${p.host_id ?? this.#o.identity()?.host_id}`);
            beat = setInterval(
              guard('stream: heartbeat', () =>
                this.send(frame('heartbeat', { host_id: this.#o.identity()?.host_id })),
              ),
              HEARTBEAT_INTERVAL_MS,
            );
            return;
          }
          if (f.type === 'command') this.#o.onCommand(f);
        }),
      );
      ws.on('error', (err) => this.#o.log(`stream error: ${err.message}`));
      ws.on('close', (code, reason) => {
        clearInterval(beat);
        this.#ws = null;
        this.#o.onClosed?.();
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  stop(): void {
    this.#stop = true;
    this.#ws?.close(1000, 'sidecar stopping');
    this.#stopped.abort();
  }
}

/**
 * 1 s, 2 s, 4 s ... capped at 30 s, each with up to 25% jitter so a fleet does not reconnect in
 * step; the jitter only adds, so no wait is under the spec's 1 s floor or over its 30 s cap.
 */
export const backoff = (attempt: number): number =>
  expBackoff(attempt, { baseMs: 1000, capMs: 30_000, jitter: 0.25 });
