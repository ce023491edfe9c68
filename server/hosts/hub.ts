// The host stream hub (spec "Host stream protocol"): sidecars dial in, say hello with a join
// token (first time) or their id and secret, then heartbeat and answer commands. The hub never
// dials a host. It is the transport only: it authenticates streams, enforces the stream's limits,
// parses frames and emits `hello`, `frame` and `gone` (hub-events.ts); the dispatcher and the
// host records (host-records.ts) subscribe. It keeps the live view of which hosts are connected.
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { isDeepStrictEqual } from 'node:util';
import { WebSocket, WebSocketServer } from 'ws';
import {
  type Frame,
  type FrameError,
  HEARTBEAT_GRACE_MS,
  MAX_FRAME_BYTES,
  parseFrame,
  STREAM_PATH,
} from '../../protocol/frames.ts';
import { type HelloPayload, helloReply, parseHello } from '../../protocol/hello.ts';
import { newSecret, PREFIX } from '../../protocol/ids.ts';
import { decodeOutput, type OutputFrame, type OutputFrameError } from '../../protocol/processes.ts';
import { Emitter } from '../../shared/emitter.ts';
import { guard, reportFault } from '../../shared/faults.ts';
import { type Db, now, parseJson } from '../db/types.ts';
import { hashSecret } from '../identity/secrets.ts';
import type { HostConnectivity } from './connectivity.ts';
import { type Admitted, type Conn, newConn, refuse, refuseHandshake } from './hub-conn.ts';
import type { HostHello, HubEvents } from './hub-events.ts';
import { releaseJoinToken } from './join-tokens.ts';
import { KnownHellos } from './known-hellos.ts';
import { type AdmitKnown, insertHost, setLastSeen } from './store.ts';
import {
  admitEvent,
  admitOutput,
  MAX_PROGRESS_CHARS,
  PRE_HELLO_MAX_BYTES,
  StreamSocket,
} from './stream-limits.ts';

export const HELLO_TIMEOUT_MS = 10_000;
const SWEEP_EVERY_MS = 5_000;
/** Handles a WebSocket upgrade on a path other than the host stream's. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export type JoinTokenConsumer = (
  db: Db,
  token: string,
) => Promise<{ teamId: string; cloudId: string } | { error: string }>;

export interface HubLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export class Hub extends Emitter<HubEvents> implements HostConnectivity {
  #db: Db;
  #consume: JoinTokenConsumer;
  #log: HubLogger;
  #wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_FRAME_BYTES,
    perMessageDeflate: false,
    WebSocket: StreamSocket,
  });
  #conns = new Map<string, Conn>();
  #seen = new Map<string, string>();
  #sweeper: NodeJS.Timeout;
  #onJoined: (token: string, hostId: string) => Promise<void>;
  #locator: { admit: AdmitKnown; unlocate: (hostId: string) => void } | undefined;
  /** Without a replica's locator (a hub on its own): known hellos written here, made on first use. */
  #hellos: KnownHellos | undefined;

  constructor(
    db: Db,
    consume: JoinTokenConsumer,
    log: HubLogger,
    onJoined?: (token: string, hostId: string) => Promise<void>,
  ) {
    // A subscriber's failure is logged; it never breaks the stream or the other subscribers.
    super((err, name, event) => log.warn({ err, host: event.hostId }, `${name} handling failed`));
    this.#db = db;
    this.#onJoined = onJoined ?? (async () => {});
    this.#consume = consume;
    this.#log = log;
    this.#sweeper = setInterval(
      guard('host streams: heartbeat sweep', () => this.#sweep()),
      SWEEP_EVERY_MS,
    );
    this.#sweeper.unref();
  }

  /** Replicas: `admit` writes a known host's location too; `unlocate`: its stream closed first. */
  locateWith(admit: AdmitKnown, unlocate: (hostId: string) => void): void {
    this.#locator = { admit, unlocate };
  }

  attach(server: Server, other?: UpgradeHandler): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== STREAM_PATH && other) return other(req, socket, head);
      if (path !== STREAM_PATH) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      const accept = guard('host streams: accept', (ws: WebSocket) => this.#accept(ws, socket, head.length));
      try {
        this.#wss.handleUpgrade(req, socket, head, accept);
      } catch (err) {
        // A stream that cannot be set up is that one client's failure, never the process's.
        socket.destroy();
        reportFault('host streams: upgrade', err);
      }
    });
  }

  isConnected(hostId: string): boolean {
    return this.#conns.has(hostId);
  }

  /** Writes a frame on the host's open stream here; false when it has none. */
  write(hostId: string, f: Frame): boolean {
    const c = this.#conns.get(hostId);
    return c ? this.#send(c, f) : false;
  }

  /** Sidecar hosts with an open stream (GET /metrics). */
  connectedCount(): number {
    return this.#conns.size;
  }

  /** Writes a frame on one stream (the `send` of its hello); false once it is not open. */
  #send(c: Conn, f: Frame): boolean {
    if (c.ws.readyState !== WebSocket.OPEN) return false;
    // A stream can die between the check and the write; its commands fail when its `gone` arrives.
    c.ws.send(JSON.stringify(f), (err) => {
      if (err)
        this.#log.warn({ host: c.hostId, frame: f.type, err: err.message }, 'write to host stream failed');
    });
    return true;
  }

  /** Resolves with the id of the first host of `teamId` (and `cloudId`, when given) that says hello. */
  waitForHost(teamId: string, cloudId: string, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const off = this.on('hello', (h) => {
        if (h.teamId !== teamId || (cloudId && h.cloudId !== cloudId)) return;
        clearTimeout(timer);
        off();
        resolve(h.hostId);
      });
      const timer = setTimeout(() => {
        off();
        reject(new Error(`no host joined within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
    });
  }

  /** Resolves true once `hostId` has an open stream (at once if it has), false at the timeout. */
  waitConnected(hostId: string, timeoutMs: number): Promise<boolean> {
    if (this.#conns.has(hostId)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const off = this.on('hello', (h) => {
        if (h.hostId !== hostId) return;
        clearTimeout(timer);
        off();
        resolve(true);
      });
      const timer = setTimeout(() => {
        off();
        resolve(false);
      }, timeoutMs);
    });
  }

  #accept(ws: WebSocket, socket: Duplex, headBytes: number): void {
    // A stream is awaiting its hello, checking it (async), or open with a registered host.
    let state: 'await-hello' | 'checking' | 'open' = 'await-hello';
    let conn: Conn | null = null;
    // Until the hello is accepted, the peer is unknown: it may send the hello and nothing more,
    // so a nearly complete 16 MiB frame is never buffered for it.
    let preHello = headBytes;
    const countPreHello = guard('host streams: pre-hello bound', (chunk: Buffer) => {
      preHello += chunk.length;
      if (preHello > PRE_HELLO_MAX_BYTES) {
        socket.off('data', countPreHello);
        refuseHandshake(ws, socket, 'hello: more than 64 KiB sent before the hello was accepted');
      }
    });
    socket.on('data', countPreHello);
    const helloTimer = setTimeout(
      guard('host streams: hello timeout', () =>
        refuseHandshake(ws, socket, 'hello: no hello frame within 10 s'),
      ),
      HELLO_TIMEOUT_MS,
    );
    // One stream's bad frame, or a bug in handling it, is that stream's failure, never the process's.
    ws.on(
      'message',
      guard('host streams: frame', (data: WebSocket.RawData, isBinary: boolean) => {
        if (isBinary) {
          // Binary frames are process output, only from a host whose hello was accepted.
          if (!conn) return refuse(ws, 'frames must be JSON text');
          conn.lastFrameAt = Date.now();
          return this.#onOutput(conn, data as Buffer);
        }
        let f: Frame;
        try {
          f = parseFrame(data.toString());
        } catch (err) {
          return refuse(ws, (err as FrameError).message);
        }
        if (state === 'checking') return refuse(ws, 'frames sent before the hello reply');
        if (state === 'await-hello') {
          clearTimeout(helloTimer);
          state = 'checking';
          return this.#hello(ws, f).then((c) => {
            conn = c;
            state = 'open';
            if (c) socket.off('data', countPreHello);
          });
        }
        if (!conn) return;
        conn.lastFrameAt = Date.now();
        this.#onFrame(conn, f);
      }),
    );
    ws.on(
      'close',
      guard('host streams: close', () => {
        clearTimeout(helloTimer);
        socket.off('data', countPreHello);
        if (conn) this.#gone(conn, 'host disconnected');
      }),
    );
    ws.on('error', () => {});
  }

  async #hello(ws: WebSocket, f: Frame): Promise<Conn | null> {
    let hello: HelloPayload;
    try {
      hello = parseHello(f);
    } catch (err) {
      refuse(ws, `hello: ${(err as Error).message}`);
      return null;
    }
    try {
      const a = hello.host_id ? await this.#known(ws, hello) : await this.#join(ws, hello);
      if (a?.located && ws.readyState !== WebSocket.OPEN) this.#locator?.unlocate(a.c.hostId);
      if (!a || ws.readyState !== WebSocket.OPEN) return null;
      const c = a.c;
      const old = this.#conns.get(c.hostId);
      this.#conns.set(c.hostId, c);
      if (old) {
        this.emit('gone', { hostId: c.hostId, reason: 'host reconnected on a newer stream', replaced: true });
        refuse(old.ws, 'replaced by a newer connection for this host');
      }
      this.#log.info({ host: c.hostId, replaced: Boolean(old) }, 'host connected');
      this.emit('hello', this.#helloEvent(a, hello));
      return c;
    } catch (err) {
      this.#log.warn({ err }, 'hello failed');
      refuse(ws, 'hello: internal error');
      return null;
    }
  }

  #helloEvent({ c, located, current }: Admitted, hello: HelloPayload): HostHello {
    return {
      located,
      capabilitiesRecorded: current,
      hostId: c.hostId,
      teamId: c.teamId,
      cloudId: c.cloudId,
      capabilities: hello.capabilities,
      send: (f) => this.#send(c, f),
      current: () => this.#conns.get(c.hostId) === c && c.ws.readyState === WebSocket.OPEN,
    };
  }

  async #join(ws: WebSocket, hello: HelloPayload): Promise<Admitted | null> {
    const used = await this.#consume(this.#db, hello.token);
    if ('error' in used) {
      refuse(ws, used.error);
      return null;
    }
    const secret = newSecret(PREFIX.hostSecret);
    const caps = hello.capabilities;
    const host = await insertHost(this.#db, {
      teamId: used.teamId,
      cloudId: used.cloudId,
      name: typeof caps.hostname === 'string' && caps.hostname ? caps.hostname.slice(0, 200) : 'host',
      status: 'connected',
      secretHash: hashSecret(secret),
      capabilities: caps,
      lastSeenAt: now(),
    }).catch(async (err) => {
      // No host was recorded: the token was not used after all, so the sidecar may retry.
      await releaseJoinToken(this.#db, hello.token).catch(() => {});
      throw err;
    });
    await this.#onJoined(hello.token, host.ID);
    ws.send(JSON.stringify(helloReply(host.ID, secret)));
    return { c: newConn(ws, host.ID, used.teamId, used.cloudId), located: false, current: false };
  }

  async #known(ws: WebSocket, hello: HelloPayload): Promise<Admitted | null> {
    const caps = Object.keys(hello.capabilities).length ? hello.capabilities : undefined;
    const secretHash = hashSecret(hello.token);
    if (!this.#locator) this.#hellos ??= new KnownHellos(this.#db);
    const admit = this.#locator?.admit ?? (this.#hellos as KnownHellos).admit;
    const k = await admit({ id: hello.host_id, secretHash, at: now(), capabilities: caps });
    if (!k) {
      refuse(ws, 'hello: unknown host or bad host secret');
      return null;
    }
    ws.send(JSON.stringify(helloReply(hello.host_id)));
    const current = caps !== undefined && isDeepStrictEqual(caps, parseJson(k.recorded, null));
    return { c: newConn(ws, hello.host_id, k.teamId, k.cloudId), located: Boolean(this.#locator), current };
  }

  /** Applies the stream's own rules to a frame, then hands it to the subscribers. */
  #onFrame(c: Conn, f: Frame): void {
    switch (f.type) {
      case 'heartbeat':
        this.#seen.set(c.hostId, now());
        break;
      case 'ack':
      case 'result':
        break;
      case 'progress':
        if (f.message && f.message.length > MAX_PROGRESS_CHARS)
          f.message = `${f.message.slice(0, MAX_PROGRESS_CHARS)}...`;
        break;
      case 'event':
        if (!this.#admit(c, f)) return;
        break;
      default:
        refuse(c.ws, `unexpected ${f.type} frame from a host`);
        return;
    }
    this.emit('frame', { hostId: c.hostId, teamId: c.teamId, frame: f });
  }

  /** A process output frame: decoded, then counted against the host's output budget. */
  #onOutput(c: Conn, data: Buffer): void {
    let f: OutputFrame;
    try {
      f = decodeOutput(data);
    } catch (err) {
      refuse(c.ws, (err as OutputFrameError).message);
      return;
    }
    const admitted = admitOutput(c, f);
    if (!admitted && c.outputDropped++ % 1000 === 0)
      this.#log.warn(
        { host: c.hostId, dropped: c.outputDropped },
        'process output over the host budget dropped',
      );
    this.emit('output', { hostId: c.hostId, frame: f, admitted });
  }

  /** False for an event frame that is too large, malformed or over the host's rate. */
  #admit(c: Conn, f: Frame): boolean {
    const why = admitEvent(c, f);
    if (!why) return true;
    // One warning per burst of drops, not one per frame.
    if (c.dropped++ % 1000 === 0)
      this.#log.warn({ host: c.hostId, dropped: c.dropped }, `event dropped: ${why}`);
    return false;
  }

  #gone(c: Conn, reason: string): void {
    if (this.#conns.get(c.hostId) !== c) return; // replaced: the newer stream owns the host now
    this.#conns.delete(c.hostId);
    this.#log.info({ host: c.hostId }, 'host disconnected');
    this.emit('gone', { hostId: c.hostId, reason, replaced: false });
  }

  /** Drops streams silent past the grace window and flushes heartbeat times. */
  async #sweep(): Promise<void> {
    const cutoff = Date.now() - HEARTBEAT_GRACE_MS;
    for (const c of this.#conns.values()) if (c.lastFrameAt < cutoff) c.ws.terminate();
    await this.flush();
  }

  /** Writes the heartbeat times seen since the last flush (one per host), a chunk per statement. */
  async flush(): Promise<void> {
    if (this.#seen.size === 0) return;
    const batch = [...this.#seen];
    this.#seen.clear();
    await setLastSeen(this.#db, batch).catch((err) => this.#log.warn({ err }, 'heartbeat flush failed'));
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
    await this.#sweep();
    for (const c of this.#conns.values()) c.ws.close(1001, 'control plane shutting down');
    this.#wss.close();
  }
}
