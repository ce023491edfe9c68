// The host stream hub (spec "Host stream protocol"): sidecars dial in, say hello with a join
// token (first time) or their id and secret, then heartbeat and answer commands. The hub never
// dials a host. It keeps the live view of which hosts are connected.
import { EventEmitter } from 'node:events';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';
import {
  checkCapabilities,
  type Frame,
  type FrameError,
  frame,
  HEARTBEAT_GRACE_MS,
  type HelloPayload,
  MAX_FRAME_BYTES,
  POLICY_VIOLATION,
  parseFrame,
  parseHello,
  STREAM_PATH,
} from '../../protocol/frames.ts';
import { newSecret, PREFIX } from '../../protocol/ids.ts';
import type { HostConnectivity } from '../context.ts';
import { type Db, now } from '../db/types.ts';
import { appendEvent } from '../events/store.ts';
import { hashSecret, secretMatches } from '../identity/secrets.ts';
import type { Dispatcher, Transport } from './dispatcher.ts';
import { releaseJoinToken } from './join-tokens.ts';
import { getHostRow, insertHost, setLastSeen, updateHost } from './store.ts';
import {
  admitEvent,
  EVENT_BURST,
  MAX_PROGRESS_CHARS,
  PRE_HELLO_MAX_BYTES,
  REFUSED_LINGER_MS,
  StreamSocket,
} from './stream-limits.ts';

export const HELLO_TIMEOUT_MS = 10_000;
const SWEEP_EVERY_MS = 5_000;
export type JoinTokenConsumer = (
  db: Db,
  token: string,
) => Promise<{ teamId: string; cloudId: string } | { error: string }>;

interface Conn {
  ws: WebSocket;
  hostId: string;
  teamId: string;
  cloudId: string;
  lastFrameAt: number;
  /** Event-frame tokens left and when they were last refilled (M1). */
  eventTokens: number;
  eventRefillAt: number;
  dropped: number;
}

export interface HubLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export class Hub implements HostConnectivity, Transport {
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
  #events = new EventEmitter();
  #sweeper: NodeJS.Timeout;
  dispatcher: Dispatcher | null = null;

  #onJoined: (token: string, hostId: string) => Promise<void>;

  constructor(
    db: Db,
    consume: JoinTokenConsumer,
    log: HubLogger,
    onJoined?: (token: string, hostId: string) => Promise<void>,
  ) {
    this.#db = db;
    this.#onJoined = onJoined ?? (async () => {});
    this.#consume = consume;
    this.#log = log;
    this.#events.setMaxListeners(0);
    this.#sweeper = setInterval(() => void this.#sweep(), SWEEP_EVERY_MS);
    this.#sweeper.unref();
  }

  attach(server: Server): void {
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== STREAM_PATH) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      this.#wss.handleUpgrade(req, socket, head, (ws) => this.#accept(ws, socket, head.length));
    });
  }

  isConnected(hostId: string): boolean {
    return this.#conns.has(hostId);
  }

  /** Sidecar hosts with an open stream (GET /metrics). */
  connectedCount(): number {
    return this.#conns.size;
  }

  write(hostId: string, f: Frame): boolean {
    const c = this.#conns.get(hostId);
    if (!c || c.ws.readyState !== WebSocket.OPEN) return false;
    // A stream can die between the check and the write; its commands fail when its close arrives.
    c.ws.send(JSON.stringify(f), (err) => {
      if (err)
        this.#log.warn({ host: hostId, frame: f.type, err: err.message }, 'write to host stream failed');
    });
    return true;
  }

  /** Resolves with the id of the first host of `teamId` (and `cloudId`, when given) that says hello. */
  waitForHost(teamId: string, cloudId: string, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const onHello = (c: Conn) => {
        if (c.teamId !== teamId || (cloudId && c.cloudId !== cloudId)) return;
        clearTimeout(timer);
        this.#events.off('hello', onHello);
        resolve(c.hostId);
      };
      const timer = setTimeout(() => {
        this.#events.off('hello', onHello);
        reject(new Error(`no host joined within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      this.#events.on('hello', onHello);
    });
  }

  /** Resolves true once `hostId` has an open stream (at once if it has), false at the timeout. */
  waitConnected(hostId: string, timeoutMs: number): Promise<boolean> {
    if (this.#conns.has(hostId)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const onHello = (c: Conn) => {
        if (c.hostId !== hostId) return;
        clearTimeout(timer);
        this.#events.off('hello', onHello);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#events.off('hello', onHello);
        resolve(false);
      }, timeoutMs);
      this.#events.on('hello', onHello);
    });
  }

  #accept(ws: WebSocket, socket: Duplex, headBytes: number): void {
    // A stream is awaiting its hello, checking it (async), or open with a registered host.
    let state: 'await-hello' | 'checking' | 'open' = 'await-hello';
    let conn: Conn | null = null;
    // Until the hello is accepted, the peer is unknown: it may send the hello and nothing more,
    // so a nearly complete 16 MiB frame is never buffered for it (H4).
    let preHello = headBytes;
    const countPreHello = (chunk: Buffer) => {
      preHello += chunk.length;
      if (preHello > PRE_HELLO_MAX_BYTES) {
        socket.off('data', countPreHello);
        refuseHandshake(ws, socket, 'hello: more than 64 KiB sent before the hello was accepted');
      }
    };
    socket.on('data', countPreHello);
    const helloTimer = setTimeout(
      () => refuseHandshake(ws, socket, 'hello: no hello frame within 10 s'),
      HELLO_TIMEOUT_MS,
    );
    ws.on('message', (data, isBinary) => {
      if (isBinary) return refuse(ws, 'frames must be JSON text');
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
        void this.#hello(ws, f).then((c) => {
          conn = c;
          state = 'open';
          if (c) socket.off('data', countPreHello);
        });
        return;
      }
      if (!conn) return;
      const c: Conn = conn;
      c.lastFrameAt = Date.now();
      void this.#onFrame(c, f).catch((err) =>
        this.#log.warn({ err, host: c.hostId }, 'frame handling failed'),
      );
    });
    ws.on('close', () => {
      clearTimeout(helloTimer);
      socket.off('data', countPreHello);
      if (conn) void this.#gone(conn, 'host disconnected');
    });
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
      const c = hello.host_id ? await this.#known(ws, hello) : await this.#join(ws, hello);
      if (!c || ws.readyState !== WebSocket.OPEN) return null;
      const old = this.#conns.get(c.hostId);
      this.#conns.set(c.hostId, c);
      if (old) {
        this.dispatcher?.hostGone(c.hostId, 'host reconnected on a newer stream');
        refuse(old.ws, 'replaced by a newer connection for this host');
      }
      this.#events.emit('hello', c);
      this.#log.info({ host: c.hostId, replaced: Boolean(old) }, 'host connected');
      void this.#refresh(c);
      return c;
    } catch (err) {
      this.#log.warn({ err }, 'hello failed');
      refuse(ws, 'hello: internal error');
      return null;
    }
  }

  /** Asks a host that just connected for its capabilities (host.report) and records them. */
  async #refresh(c: Conn): Promise<void> {
    const d = this.dispatcher;
    if (!d) return;
    try {
      const r = await d.run(
        { hostId: c.hostId, teamId: c.teamId, kind: 'sidecar' },
        '',
        'host.report',
        {},
        30_000,
      );
      checkCapabilities(r.capabilities ?? {});
      if (this.#conns.get(c.hostId) === c)
        await updateHost(this.#db, c.hostId, {
          capabilities: r.capabilities as unknown as Record<string, unknown>,
        });
    } catch (err) {
      this.#log.warn({ host: c.hostId, err: (err as Error).message }, 'host.report failed');
    }
  }

  async #join(ws: WebSocket, hello: HelloPayload): Promise<Conn | null> {
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
    }).catch(async (err) => {
      // No host was recorded: the token was not used after all (M3), so the sidecar may retry.
      await releaseJoinToken(this.#db, hello.token).catch(() => {});
      throw err;
    });
    await updateHost(this.#db, host.ID, { lastSeenAt: now() });
    await this.#onJoined(hello.token, host.ID);
    ws.send(JSON.stringify(frame('hello', { host_id: host.ID, payload: { host_id: host.ID, secret } })));
    return newConn(ws, host.ID, used.teamId, used.cloudId);
  }

  async #known(ws: WebSocket, hello: HelloPayload): Promise<Conn | null> {
    const row = await getHostRow(this.#db, hello.host_id);
    if (row?.kind !== 'sidecar' || !row.secret_hash || !secretMatches(hello.token, row.secret_hash)) {
      refuse(ws, 'hello: unknown host or bad host secret');
      return null;
    }
    const caps = Object.keys(hello.capabilities).length ? hello.capabilities : undefined;
    await updateHost(this.#db, row.id, { status: 'connected', lastSeenAt: now(), capabilities: caps });
    ws.send(JSON.stringify(frame('hello', { host_id: row.id, payload: { host_id: row.id } })));
    return newConn(ws, row.id, row.team_id, row.cloud_id);
  }

  async #onFrame(c: Conn, f: Frame): Promise<void> {
    const d = this.dispatcher;
    switch (f.type) {
      case 'heartbeat':
        this.#seen.set(c.hostId, now());
        return;
      case 'ack':
        return d?.handleAck(c.hostId, f);
      case 'progress':
        if (f.message && f.message.length > MAX_PROGRESS_CHARS)
          f.message = `${f.message.slice(0, MAX_PROGRESS_CHARS)}...`;
        return d?.handleProgress(c.hostId, f);
      case 'result':
        return d?.handleResult(c.hostId, f);
      case 'event':
        return this.#event(c, f);
      default:
        refuse(c.ws, `unexpected ${f.type} frame from a host`);
    }
  }

  /** Stores a host's event frame unless it is too large, malformed or over the host's rate (M1). */
  async #event(c: Conn, f: Frame): Promise<void> {
    const why = admitEvent(c, f);
    if (why) {
      // One warning per burst of drops, not one per frame.
      if (c.dropped++ % 1000 === 0)
        this.#log.warn({ host: c.hostId, dropped: c.dropped }, `event dropped: ${why}`);
      return;
    }
    await appendEvent(this.#db, c.teamId, `host:${c.hostId}`, f.kind || 'event', f.payload ?? null);
  }

  async #gone(c: Conn, reason: string): Promise<void> {
    if (this.#conns.get(c.hostId) !== c) return; // replaced: the newer stream owns the host now
    this.#conns.delete(c.hostId);
    this.dispatcher?.hostGone(c.hostId, reason);
    this.#log.info({ host: c.hostId }, 'host disconnected');
    await updateHost(this.#db, c.hostId, { status: 'unreachable' }).catch(() => {});
  }

  /** Drops streams silent past the grace window and flushes heartbeat times. */
  async #sweep(): Promise<void> {
    const cutoff = Date.now() - HEARTBEAT_GRACE_MS;
    for (const c of this.#conns.values()) if (c.lastFrameAt < cutoff) c.ws.terminate();
    await this.flush();
  }

  /** Writes the heartbeat times seen since the last flush, in one transaction. */
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

function newConn(ws: WebSocket, hostId: string, teamId: string, cloudId: string): Conn {
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
  };
}

/** A refusal before the hello: the 1008 close frame goes out, reading stops, the socket is cut. */
function refuseHandshake(ws: WebSocket, socket: Duplex, reason: string): void {
  refuse(ws, reason);
  socket.pause();
  setTimeout(() => ws.terminate(), REFUSED_LINGER_MS).unref();
}

function refuse(ws: WebSocket, reason: string): void {
  if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) {
    // Close reasons are limited to 123 bytes by the WebSocket protocol.
    ws.close(POLICY_VIOLATION, Buffer.from(reason).subarray(0, 123).toString());
  }
}
