// The processes of bench/hub/floors.ts: what the exec round trip costs with none of svc in it.
//   floor-peers.ts http PORT      a bare node:http server answering POST .../exec with a JSON result
//   floor-peers.ts fastify PORT   the same route on a bare Fastify app (no hooks, no schemas)
//   floor-peers.ts ws PORT        a bare ws server that, asked over IPC, sends one command frame per
//                                 op to its clients at a rate (bench/hub/measure.ts openLoop, in
//                                 this process, as hub-server.ts does) and waits for the result
//   floor-peers.ts ws-client URL N   N ws clients answering each command with an ack and a result,
//                                 as bench/hub/sidecars.ts does (answer.ts)
// Each says { op: 'ready' } over IPC once it listens or is connected.
import { createServer } from 'node:http';
import Fastify from 'fastify';
import { WebSocket, WebSocketServer } from 'ws';
import { frame } from '../../protocol/frames.ts';
import { answerCommand } from './answer.ts';
import { type LoadFigures, openLoop } from './measure.ts';

export type WsLoad = { op: 'load'; rate: number; seconds: number; warmupSeconds: number };
export type FromWsFloor = { op: 'ready' } | { op: 'measuring' } | { op: 'loaded'; figures: LoadFigures };

const [mode, where, count] = process.argv.slice(2);
const send = (m: FromWsFloor) => process.send?.(m);
const result = (n: number) => ({ exit_code: 0, stdout: '', stderr: '', duration_ms: n });
const RESULT = (n: number) => JSON.stringify(result(n));

function rawHttp(port: number): void {
  const srv = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      body += c;
    });
    req.on('end', () => {
      const out = RESULT((JSON.parse(body) as { cmd: string[] }).cmd.length);
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(out),
      });
      res.end(out);
    });
  });
  srv.listen(port, '127.0.0.1', () => send({ op: 'ready' }));
}

async function bareFastify(port: number): Promise<void> {
  const app = Fastify({ logger: false });
  app.post('/v1/envs/:id/exec', async (req) => result((req.body as { cmd: string[] }).cmd.length));
  await app.listen({ port, host: '127.0.0.1' });
  send({ op: 'ready' });
}

function wsServer(port: number): void {
  const wss = new WebSocketServer({ port, host: '127.0.0.1', perMessageDeflate: false });
  const socks: WebSocket[] = [];
  const waiting = new Map<string, () => void>();
  let n = 0;
  wss.on('connection', (ws) => {
    socks.push(ws);
    ws.on('message', (data: Buffer) => {
      const f = JSON.parse(data.toString()) as { type: string; command_id: string };
      if (f.type !== 'result') return;
      waiting.get(f.command_id)?.();
      waiting.delete(f.command_id);
    });
  });
  wss.on('listening', () => send({ op: 'ready' }));
  const fire = (i: number) =>
    new Promise<void>((resolve) => {
      const id = `cmd_${(n++).toString(36).padStart(20, '0')}`;
      waiting.set(id, resolve);
      // The frame the dispatcher sends, built the same way (protocol/frames.ts).
      const f = frame('command', {
        host_id: 'host_floor',
        command_id: id,
        kind: 'env.exec',
        env_id: 'env_floor',
        payload: { service: 'main', cmd: ['true'], timeout_sec: 20 },
      });
      socks[i % socks.length].send(JSON.stringify(f));
    });
  process.on('message', async (m: WsLoad) => {
    if (m?.op !== 'load') return;
    if (m.warmupSeconds > 0) await openLoop(m.rate, m.warmupSeconds, fire);
    send({ op: 'measuring' });
    send({ op: 'loaded', figures: await openLoop(m.rate, m.seconds, fire) });
  });
}

function wsClients(url: string, n: number): void {
  let open = 0;
  for (let i = 0; i < n; i++) {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.on('open', () => {
      if (++open === n) send({ op: 'ready' });
    });
    ws.on('message', (data: Buffer) => {
      const f = JSON.parse(data.toString()) as { command_id: string };
      answerCommand(ws, 'host_floor', f.command_id, `"ok":true,"payload":${RESULT(0)}`);
    });
  }
}

if (mode === 'http') rawHttp(Number(where));
else if (mode === 'fastify') await bareFastify(Number(where));
else if (mode === 'ws') wsServer(Number(where));
else if (mode === 'ws-client') wsClients(where, Number(count));
else throw new Error(`floor-peers.ts: unknown mode ${mode}`);
process.on('disconnect', () => process.exit(0));
