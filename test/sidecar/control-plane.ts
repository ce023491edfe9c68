// A fake control plane for exact sidecar tests: a WebSocket server on the stream path that
// accepts hellos, hands out an identity, records every frame and lets a test send commands.
import { createServer, type Server } from 'node:http';
import { type WebSocket, WebSocketServer } from 'ws';
import { type Frame, frame, STREAM_PATH } from '../../protocol/frames.ts';

export class FakeControlPlane {
  server: Server;
  wss: WebSocketServer;
  url = '';
  frames: Frame[] = [];
  hellos: Frame[] = [];
  socket: WebSocket | null = null;
  /** When set, hellos are refused with 1008 and this reason. */
  refuse: string | null = null;
  connections = 0;

  constructor() {
    this.server = createServer((_req, res) => res.writeHead(404).end());
    this.wss = new WebSocketServer({ server: this.server, path: STREAM_PATH });
    this.wss.on('connection', (ws) => {
      this.connections++;
      ws.on('message', (data) => {
        const f = JSON.parse(data.toString()) as Frame;
        this.frames.push(f);
        if (f.type !== 'hello') return;
        this.hellos.push(f);
        if (this.refuse) return ws.close(1008, this.refuse);
        this.socket = ws;
        const p = f.payload as { host_id: string };
        ws.send(
          JSON.stringify(
            frame('hello', {
              payload: p.host_id
                ? { host_id: p.host_id }
                : { host_id: 'host_fake1', secret: 'dhs_fakesecret' },
            }),
          ),
        );
      });
    });
  }

  async listen(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    return this;
  }

  send(id: string, kind: string, envId: string, payload: unknown): void {
    this.socket?.send(JSON.stringify(frame('command', { command_id: id, kind, env_id: envId, payload })));
  }

  async result(id: string, timeoutMs = 60_000, nth = 1): Promise<Frame> {
    const start = Date.now();
    for (;;) {
      const found = this.frames.filter((f) => f.type === 'result' && f.command_id === id);
      if (found.length >= nth) return found[nth - 1];
      if (Date.now() - start > timeoutMs) throw new Error(`no result #${nth} for ${id}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    this.wss.close();
    await new Promise((r) => this.server.close(r));
  }
}
