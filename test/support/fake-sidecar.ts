// A fake sidecar for fast, exact orchestrator tests: a real WebSocket client speaking the host
// stream protocol. It records every frame both ways and answers commands from per-kind handlers
// (default: plausible success results), so a test can script failures, delays and disconnects.
import { WebSocket } from 'ws';
import type { CommandKind } from '../../protocol/commands.ts';
import { type Frame, frame, STREAM_PATH } from '../../protocol/frames.ts';

export type Handler = (f: Frame, sc: FakeSidecar) => Promise<unknown> | unknown;

export class Refused extends Error {}

export const DEFAULT_CAPS = {
  hostname: 'fake-host',
  os: 'linux',
  arch: 'amd64',
  cpus: 2,
  memory_mb: 4096,
  disk_gb: 10,
  storage: 'dir',
  docker: '27.0.0',
  compose: true,
  netns: true,
  denvd_version: 'fake',
};

const noFiles = () => ({ refusal: { code: 'not_found', message: 'the fake host has no files' } });
const FAKE_PROCESS = {
  pid: 'proc_fake',
  service: 'app',
  cmd: ['true'],
  status: 'exited',
  exit_code: 0,
  started_at: '2026-01-01T00:00:00.000Z',
  tty: false,
  stdin: false,
};

/** Plausible successful results for every kind. */
export const defaultHandlers: Record<CommandKind, Handler> = {
  'host.report': () => ({ capabilities: DEFAULT_CAPS }),
  'env.create': (f) => ({
    endpoints: {},
    started_in: 12,
    digests: {},
    storage: 'dir',
    egress: (f.payload as { egress: string }).egress === 'allow' ? 'allowed' : 'denied (verified)',
  }),
  'env.snapshot': (f) => ({
    snapshot: (f.payload as { name: string }).name,
    datasets: ['data'],
    frozen_for: 5,
    consistent: true,
  }),
  'env.fork': () => ({ forked_in: 7, endpoints: {} }),
  'env.rollback': (f) => ({ snapshot: (f.payload as { snapshot: string }).snapshot, endpoints: {} }),
  'env.exec': () => ({ exit_code: 0, stdout: '', stderr: '' }),
  'env.put': (f) => ({ path: (f.payload as { path: string }).path }),
  'env.get': () => ({ tar_b64: '' }),
  'verify.collect': () => ({ files: 1, bytes: 10, missing: [], refused: [] }),
  'verify.run': () => ({
    reward: 1,
    exit_code: 0,
    stdout: 'ok',
    stderr: '',
    source: 'reward.txt',
    ran_for: 3,
  }),
  'env.destroy': (f) => ({ destroyed: f.env_id }),
  'env.pause': () => ({ services: ['app'] }),
  'env.unpause': () => ({ services: ['app'] }),
  // The fake host has no files: every fs command finds nothing.
  'fs.stat': noFiles,
  'fs.mkdir': noFiles,
  'fs.move': noFiles,
  'fs.remove': noFiles,
  'fs.read': noFiles,
  'fs.write': noFiles,
  'fs.watch': noFiles,
  'fs.list': () => ({ entries: [], truncated: false }),
  'proc.start': () => ({ pid: 'proc_fake', started_at: new Date().toISOString() }),
  'proc.input': () => ({}),
  'proc.signal': () => ({}),
  'proc.resize': () => ({}),
  'proc.list': () => ({ processes: [] }),
  'proc.attach': () => ({ process: FAKE_PROCESS }),
  'proc.detach': () => ({}),
};

export class FakeSidecar {
  ws!: WebSocket;
  hostId = '';
  secret = '';
  received: Frame[] = [];
  sent: Frame[] = [];
  handlers: Partial<Record<string, Handler>> = {};
  closed: Promise<{ code: number; reason: string }> = Promise.resolve({ code: 0, reason: '' });
  /** When false, commands are recorded but never answered (a hung host). */
  answer = true;
  #url: string;
  #answered = new Set<string>();
  #handed = new Set<string>();

  constructor(serverUrl: string) {
    this.#url = serverUrl.replace(/^http/, 'ws') + STREAM_PATH;
  }

  /** Connects and says hello (join token the first time, host id + secret after). */
  async connect(token?: string): Promise<this> {
    this.ws = new WebSocket(this.#url, { perMessageDeflate: false });
    this.closed = new Promise((resolve) =>
      this.ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    await new Promise<void>((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.ws.once('error', reject);
    });
    const reply = new Promise<Frame>((resolve, reject) => {
      const onMsg = (data: Buffer) => {
        const f = JSON.parse(data.toString()) as Frame;
        if (f.type === 'hello') {
          this.ws.off('message', onMsg);
          resolve(f);
        }
      };
      this.ws.on('message', onMsg);
      void this.closed.then(({ code, reason }) => reject(new Refused(`${code} ${reason}`)));
    });
    this.ws.on('message', (data: Buffer) => this.#onMessage(JSON.parse(data.toString()) as Frame));
    this.send(
      frame('hello', {
        host_id: this.hostId,
        payload: { host_id: this.hostId, token: token ?? this.secret, capabilities: DEFAULT_CAPS },
      }),
    );
    const hello = await reply;
    const p = hello.payload as { host_id: string; secret?: string };
    this.hostId = p.host_id;
    if (p.secret) this.secret = p.secret;
    return this;
  }

  send(f: Frame): void {
    this.sent.push(f);
    this.ws.send(JSON.stringify(f));
  }

  heartbeat(): void {
    this.send(frame('heartbeat', { host_id: this.hostId }));
  }

  commands(kind?: string): Frame[] {
    return this.received.filter((f) => f.type === 'command' && (!kind || f.kind === kind));
  }

  /** Resolves with the oldest command of `kind` that was neither answered nor handed out before. */
  async nextCommand(kind: string, timeoutMs = 10_000): Promise<Frame> {
    const start = Date.now();
    while (Date.now() - start < timeoutMs) {
      const f = this.commands(kind).find(
        (c) => !this.#answered.has(c.command_id!) && !this.#handed.has(c.command_id!),
      );
      if (f) {
        this.#handed.add(f.command_id!);
        return f;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no new ${kind} command within ${timeoutMs} ms`);
  }

  async #onMessage(f: Frame): Promise<void> {
    this.received.push(f);
    if (f.type !== 'command' || !this.answer) return;
    this.#answered.add(f.command_id!);
    this.send(frame('ack', { command_id: f.command_id, host_id: this.hostId }));
    const handler = this.handlers[f.kind as string] ?? defaultHandlers[f.kind as CommandKind];
    try {
      if (!handler) throw new Error('unknown command kind');
      const payload = await handler(f, this);
      if (this.ws.readyState !== WebSocket.OPEN) return;
      this.send(frame('result', { command_id: f.command_id, host_id: this.hostId, ok: true, payload }));
    } catch (err) {
      if (this.ws.readyState !== WebSocket.OPEN) return;
      this.send(
        frame('result', {
          command_id: f.command_id,
          host_id: this.hostId,
          ok: false,
          error: (err as Error).message,
        }),
      );
    }
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(1000);
    await this.closed;
  }

  /** Drops the TCP connection without a close handshake (a dead host). */
  kill(): void {
    this.ws.terminate();
  }
}
