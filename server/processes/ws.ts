// GET /v1/envs/{env}/processes/{pid}/stream as a WebSocket (spec "Live processes"): the SSE
// stream's events as text frames, and the client's own messages (input, close_stdin, resize,
// signal) run in the order sent. The credential and the environment are checked before the
// upgrade, so another team's key gets a plain 404 like every route. A malformed message closes
// the socket with 1008; a message the host refuses is answered `{type: "error"}` and the stream
// goes on. Nothing a client sends can end the server: every handler's failure is caught.
// A browser cannot set headers on a WebSocket, only subprotocols: the console offers
// `svc.v1, svc.bearer.<token>[, svc.team.<team id>]` (the Kubernetes API server's way), and the
// server selects `svc.v1`, so the credential is never echoed, never in a URL, and checked exactly
// like the Authorization header (no second kind of credential, nothing to store).
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { WebSocket, WebSocketServer } from 'ws';
import { ProcessClientMessage, type ProcessClientMessageBody } from '../../protocol/api.ts';
import type { AppContext } from '../context.ts';
import { targetFor } from '../envs/io.ts';
import { SvcError, Unauthorized } from '../errors.ts';
import type { UpgradeHandler } from '../hosts/hub.ts';
import type { Caller } from '../identity/auth.ts';
import { type Control, controlProcess, followProcess } from './processes.ts';
import { FollowerSink } from './sink.ts';

const PATH = /^\/v1\/envs\/([A-Za-z0-9_-]{1,100})\/processes\/([A-Za-z0-9_-]{1,100})\/stream$/;
const SINCE = /^[0-9]{1,15}$/;
/** A client message (input is at most 64 KiB as base64, plus its envelope). */
const MAX_MESSAGE_BYTES = 128 * 1024;
/** Client messages waiting for their turn; more is a client not waiting for anything. */
const MAX_QUEUED = 64;
/** The upgrade's checks (credential, environment) must finish within this. */
const UPGRADE_TIMEOUT_MS = 30_000;
const MESSAGE_CHECK = TypeCompiler.Compile(ProcessClientMessage);
/** The subprotocol the server selects when a client sends its credential as subprotocols. */
export const WS_PROTOCOL = 'svc.v1';
const BEARER_PROTOCOL = 'svc.bearer.';
const TEAM_PROTOCOL = 'svc.team.';
/** More subprotocols than a browser client sends: refused before anything is looked up. */
const MAX_PROTOCOLS = 8;

class WsSink extends FollowerSink {
  #ws: WebSocket;
  constructor(ws: WebSocket) {
    super();
    this.#ws = ws;
  }
  protected buffered(): number {
    return this.#ws.bufferedAmount;
  }
  protected send(json: string): void {
    if (this.#ws.readyState === WebSocket.OPEN) this.#ws.send(json, this.#written);
  }
  /** Each frame written out may be the one that brought a slow client back under the bound. */
  #written = () => this.drained();
  protected finish(): void {
    if (this.#ws.readyState === WebSocket.OPEN) this.#ws.close(1000, 'end');
  }
}

function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: message });
  const reason = status === 401 ? 'Unauthorized' : status === 404 ? 'Not Found' : 'Refused';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

export function processUpgrades(
  ctx: AppContext,
  log: { warn(obj: object, msg: string): void },
): UpgradeHandler {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_MESSAGE_BYTES,
    perMessageDeflate: false,
    // Only svc.v1 is ever selected: the credential protocols are never echoed back.
    handleProtocols: (offered) => (offered.has(WS_PROTOCOL) ? WS_PROTOCOL : false),
  });
  return (req, socket, head) => {
    socket.on('error', () => {});
    const [path, query = ''] = (req.url ?? '').split('?', 2);
    const m = PATH.exec(path);
    if (!m) return refuseUpgrade(socket, 404, 'not found');
    const params = new URLSearchParams(query);
    const sinceText = params.get('since') ?? '0';
    if (!SINCE.test(sinceText)) return refuseUpgrade(socket, 400, 'since must be a sequence number');
    const timer = setTimeout(() => socket.destroy(), UPGRADE_TIMEOUT_MS);
    void check(ctx, req, m[1])
      .then((caller) => {
        clearTimeout(timer);
        if (socket.destroyed) return;
        wss.handleUpgrade(req, socket, head, (ws) =>
          serve(ctx, ws, caller, m[1], m[2], Number(sinceText), log),
        );
      })
      .catch((err) => {
        clearTimeout(timer);
        const status = err instanceof SvcError ? err.status : 500;
        if (status === 500) log.warn({ err: (err as Error).message }, 'process stream upgrade failed');
        refuseUpgrade(socket, status, status === 500 ? 'internal error' : (err as Error).message);
      });
  };
}

/**
 * The credential of an upgrade: the Authorization (and X-Svc-Team) header, or else the same values
 * offered as subprotocols by a browser. Both at once, or either twice, is a bad credential.
 */
export function upgradeCredential(req: IncomingMessage): { authorization?: string; team?: string } {
  const header = req.headers['sec-websocket-protocol'];
  const offered = typeof header === 'string' ? header.split(',', MAX_PROTOCOLS + 1).map((p) => p.trim()) : [];
  if (offered.length > MAX_PROTOCOLS) throw new Unauthorized('too many subprotocols');
  const bearer = offered.filter((p) => p.startsWith(BEARER_PROTOCOL));
  const teams = offered.filter((p) => p.startsWith(TEAM_PROTOCOL));
  const teamHeader = req.headers['x-svc-team'];
  if (bearer.length === 0 && teams.length === 0) {
    return {
      authorization: req.headers.authorization,
      team: typeof teamHeader === 'string' ? teamHeader : undefined,
    };
  }
  if (req.headers.authorization !== undefined || teamHeader !== undefined)
    throw new Unauthorized('a credential in both a header and a subprotocol');
  if (bearer.length !== 1 || teams.length > 1)
    throw new Unauthorized('one svc.bearer subprotocol, at most one svc.team');
  const team = teams[0]?.slice(TEAM_PROTOCOL.length);
  return {
    authorization: `Bearer ${bearer[0].slice(BEARER_PROTOCOL.length)}`,
    ...(team ? { team } : {}),
  };
}

async function check(ctx: AppContext, req: IncomingMessage, envId: string): Promise<Caller> {
  const { authorization, team } = upgradeCredential(req);
  const caller = await ctx.auth.authenticate(authorization, team, 'key');
  await targetFor(ctx, caller, envId);
  return caller;
}

function serve(
  ctx: AppContext,
  ws: WebSocket,
  caller: Caller,
  envId: string,
  pid: string,
  since: number,
  log: { warn(obj: object, msg: string): void },
): void {
  const sink = new WsSink(ws);
  ws.on('error', () => {});
  ws.on('close', () => sink.close());
  let queued = 0;
  // Each message enters the process's lane once the one before it did: in order, and without
  // waiting for the host's answer to the one before (processes.ts controlProcess).
  let entered: Promise<void> = Promise.resolve();
  let answered: Promise<void> = Promise.resolve();
  const control = (msg: ProcessClientMessageBody): Control => {
    switch (msg.type) {
      case 'input':
        return { kind: 'proc.input', payload: { pid, data: msg.data, close: false } };
      case 'close_stdin':
        return { kind: 'proc.input', payload: { pid, data: '', close: true } };
      case 'resize':
        return { kind: 'proc.resize', payload: { pid, rows: msg.rows, cols: msg.cols } };
      case 'signal':
        return { kind: 'proc.signal', payload: { pid, signal: msg.signal } };
    }
  };
  ws.on('message', (data, isBinary) => {
    let msg: unknown;
    try {
      msg = isBinary ? undefined : JSON.parse(data.toString());
    } catch {}
    if (!MESSAGE_CHECK.Check(msg))
      return ws.close(1008, 'a message must be one of input, close_stdin, resize, signal');
    if (++queued > MAX_QUEUED) return ws.close(1008, 'too many messages waiting');
    const c = controlProcess(ctx, caller, envId, control(msg as ProcessClientMessageBody), entered);
    entered = c.entered;
    // Refusals are told in the order the messages were sent, whichever the host answered first.
    const failed = c.done.then(
      () => null,
      (err: Error) => err,
    );
    answered = answered.then(async () => {
      const err = await failed;
      queued--;
      if (err && ws.readyState === WebSocket.OPEN)
        ws.send(JSON.stringify({ type: 'error', error: err.message }));
    });
  });
  followProcess(ctx, caller, envId, pid, since, sink).catch((err) => {
    if (!(err instanceof SvcError)) log.warn({ err: (err as Error).message }, 'process attach failed');
    sink.end({ exit_code: null, reason: (err as Error).message });
  });
}
