// GET /v1/envs/{env}/processes/{pid}/stream as a WebSocket (spec "Live processes"): the SSE
// stream's events as text frames, and the client's own messages (input, close_stdin, resize,
// signal) run in the order sent. The credential and the environment are checked before the
// upgrade, so another team's key gets a plain 404 like every route. A malformed message closes
// the socket with 1008; a message the host refuses is answered `{type: "error"}` and the stream
// goes on. Nothing a client sends can end the server: every handler's failure is caught.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { WebSocket, WebSocketServer } from 'ws';
import { ProcessClientMessage, type ProcessClientMessageBody } from '../../protocol/api.ts';
import type { AppContext } from '../context.ts';
import { targetFor } from '../envs/io.ts';
import { SvcError } from '../errors.ts';
import type { UpgradeHandler } from '../hosts/hub.ts';
import type { Caller } from '../identity/auth.ts';
import { followProcess, inputProcess, resizeProcess, signalProcess } from './processes.ts';
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
    if (this.#ws.readyState === WebSocket.OPEN) this.#ws.send(json);
  }
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

async function check(ctx: AppContext, req: IncomingMessage, envId: string): Promise<Caller> {
  const team = req.headers['x-svc-team'];
  const caller = await ctx.auth.authenticate(
    req.headers.authorization,
    typeof team === 'string' ? team : undefined,
    'key',
  );
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
  let turn: Promise<void> = Promise.resolve();
  const run = (msg: ProcessClientMessageBody): Promise<void> => {
    switch (msg.type) {
      case 'input':
        return inputProcess(ctx, caller, envId, pid, { data: msg.data });
      case 'close_stdin':
        return inputProcess(ctx, caller, envId, pid, { close: true });
      case 'resize':
        return resizeProcess(ctx, caller, envId, pid, { rows: msg.rows, cols: msg.cols });
      case 'signal':
        return signalProcess(ctx, caller, envId, pid, { signal: msg.signal });
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
    turn = turn
      .then(() => run(msg as ProcessClientMessageBody))
      .catch((err) => {
        if (ws.readyState === WebSocket.OPEN)
          ws.send(JSON.stringify({ type: 'error', error: (err as Error).message }));
      })
      .finally(() => {
        queued--;
      });
  });
  followProcess(ctx, caller, envId, pid, since, sink).catch((err) => {
    if (!(err instanceof SvcError)) log.warn({ err: (err as Error).message }, 'process attach failed');
    sink.end({ exit_code: null, reason: (err as Error).message });
  });
}
