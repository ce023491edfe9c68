// An attached live process (`svc shell`, `svc exec -i/-t`): the output stream of
// GET /v1/envs/{env}/processes/{pid}/stream as a WebSocket written to the local stdout (and stderr
// without a terminal), the local stdin forwarded, the local terminal's size sent on SIGWINCH, and
// the remote exit code returned. The local terminal is put in raw mode only while attached, and
// restored on every way out: the end, an error, a signal, and (as a last resort) process exit.
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import type { ReadStream, WriteStream } from 'node:tty';
import { WebSocket } from 'ws';
import type { ProcessStreamEventBody } from '../protocol/api.ts';
import { MAX_STDIN_CHUNK } from '../protocol/processes.ts';
import { sleep } from '../shared/concurrency.ts';
import { CliError } from './errors.ts';
import { type Client, errorMessage, seg } from './http.ts';

/** Re-attaches after a dropped stream (a control-plane restart); each waits a little longer. */
const REATTACH_DELAYS_MS = [200, 500, 1000, 2000, 4000, 8000];
/** A ping this often; a connection that did not answer the previous one is given up and re-attached. */
const PING_MS = 30_000;
const HANDSHAKE_MS = 30_000;
/** The server's frames are at most 64 KiB of output as base64 in a small envelope. */
const MAX_FRAME_BYTES = 1024 * 1024;

export interface Size {
  rows: number;
  cols: number;
}

type EndEvent = Extract<ProcessStreamEventBody, { type: 'end' }>;

/** The local terminal's size: stdout's, else stderr's, else 24x80. */
export function localSize(streams: unknown[] = [process.stdout, process.stderr]): Size {
  for (const s of streams as WriteStream[]) {
    if (!s?.isTTY) continue;
    const [cols, rows] = s.getWindowSize();
    if (cols > 0 && rows > 0) return { rows, cols };
  }
  return { rows: 24, cols: 80 };
}

/** What svc exits with for a process's end: its code, 128 + a signal's number (as a shell says), or an error. */
export function exitCodeOf(pid: string, end: Omit<EndEvent, 'type'>): number {
  if (typeof end.exit_code === 'number') return end.exit_code;
  if (end.signal) {
    const n = constants.signals[`SIG${end.signal}` as keyof typeof constants.signals];
    if (n) return 128 + n;
  }
  throw new CliError(`process ${pid} ended without an exit code${end.reason ? `: ${end.reason}` : ''}`);
}

/** Local input cut into chunks the server takes in one message (at most MAX_STDIN_CHUNK bytes). */
export function chunks(data: Buffer, max = MAX_STDIN_CHUNK): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += max) out.push(data.subarray(i, i + max));
  return out;
}

/** The text written where output was lost to the server's bounds. */
export function gapNote(from: number, to: number, tty: boolean): string {
  const n = to - from + 1;
  const what = `[svc: ${n} output frame${n === 1 ? '' : 's'} lost (seq ${from}-${to}): the process wrote faster than it was read]`;
  return tty ? `\r\n${what}\r\n` : `${what}\n`;
}

export interface AttachOptions {
  client: Client;
  env: string;
  pid: string;
  /** The process has a terminal: one output stream, resizes sent, the local terminal in raw mode. */
  tty: boolean;
  /** Forward local stdin (over the WebSocket with a terminal, by POST …/input without one). */
  stdin: boolean;
  stdinStream?: Readable;
  stdout?: Writable;
  stderr?: Writable;
}

/** The local terminal in raw mode while attached; restore() is idempotent and safe at exit. */
class RawMode {
  #input: ReadStream | null;
  constructor(input: Readable | null) {
    const tty = input as ReadStream | null;
    this.#input = tty?.isTTY && typeof tty.setRawMode === 'function' ? tty : null;
  }
  enter(): void {
    this.#input?.setRawMode(true);
    process.once('exit', this.restore);
  }
  readonly restore = (): void => {
    process.removeListener('exit', this.restore);
    try {
      this.#input?.setRawMode(false);
    } catch {}
    this.#input = null;
  };
}

/** Follows the process until its end; returns svc's exit code. */
export async function attach(o: AttachOptions): Promise<number> {
  // stdin is not touched unless forwarded: a process without input leaves it to the shell.
  const stdin = o.stdin ? (o.stdinStream ?? process.stdin) : null;
  const raw = new RawMode(o.tty ? stdin : null);
  const session = new Session(o, stdin);
  raw.enter();
  try {
    return await session.run();
  } finally {
    raw.restore();
    session.close();
  }
}

/** Local signals: the first is passed to the process, a second (or a hangup) detaches svc from it. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;
/** How following ends: the process's exit code, or an error. */
type Stop = { code?: number; error?: Error };
/** A stream that closed before the end (to be re-attached). */
type Drop = { reason: string };

class Session {
  readonly #o: AttachOptions;
  readonly #stdin: Readable | null;
  readonly #out: Writable;
  readonly #err: Writable;
  #ws: WebSocket | null = null;
  #lastSeq = 0;
  #stdinOpen: boolean;
  #signalled = false;
  /** The size was sent after the first output. */
  #sized = false;
  /** The end arrived: a socket closing after it is no drop to re-attach after. */
  #ended = false;
  #stop: ((r: Stop) => void) | null = null;
  readonly #cleanups: (() => void)[] = [];

  constructor(o: AttachOptions, stdin: Readable | null) {
    this.#o = o;
    this.#stdin = stdin;
    this.#out = o.stdout ?? process.stdout;
    this.#err = o.stderr ?? process.stderr;
    this.#stdinOpen = stdin !== null;
  }

  #note(text: string): void {
    this.#err.write(this.#o.tty ? `\r\n${text}\r\n` : `${text}\n`);
  }

  async run(): Promise<number> {
    const stopped = new Promise<Stop>((resolve) => {
      this.#stop = resolve;
    });
    this.#listen();
    for (let attempt = 0; ; attempt++) {
      let r: Stop | Drop = await Promise.race([this.#follow(attempt > 0), stopped]);
      if (this.#ended) r = await stopped;
      if (!('reason' in r)) {
        if (r.error) throw r.error;
        return r.code as number;
      }
      const dropped = r;
      if (attempt >= REATTACH_DELAYS_MS.length)
        throw new CliError(
          `lost the stream of ${this.#o.pid} (${dropped.reason}); it may still run: svc ps ${this.#o.env}`,
        );
      await Promise.race([sleep(REATTACH_DELAYS_MS[attempt]), stopped]);
    }
  }

  #finish(r: Stop): void {
    this.#stop?.(r);
    this.#stop = null;
  }

  /** One WebSocket: resolves with the end (as a stop) or with why it dropped. */
  #follow(again: boolean): Promise<Drop> {
    const { client, env, pid } = this.#o;
    const url = `${client.server.replace(/^http/, 'ws')}/v1/envs/${seg(env)}/processes/${seg(pid)}/stream?since=${this.#lastSeq}`;
    return new Promise((resolve) => {
      const ws = new WebSocket(url, {
        headers: client.authHeaders(),
        handshakeTimeout: HANDSHAKE_MS,
        perMessageDeflate: false,
        maxPayload: MAX_FRAME_BYTES,
      });
      let opened = false;
      let alive = true;
      let ping: NodeJS.Timeout | undefined;
      ws.on('pong', () => {
        alive = true;
      });
      let refused = false;
      ws.on('unexpected-response', (req, res) => {
        // The server's answer (401, 404 …) is the error, as for any request.
        refused = true;
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.length < 64 && parts.push(d));
        res.on('error', () => {});
        res.on('end', () => {
          // A proxy's 5xx while the control plane restarts is one more drop to re-attach after.
          if (again && (res.statusCode ?? 0) >= 500) {
            req.destroy();
            ws.terminate();
            return;
          }
          const type = String(res.headers['content-type'] ?? '');
          this.#finish({
            error: errorMessage(res.statusCode ?? 0, res.statusMessage ?? '', type, Buffer.concat(parts)),
          });
          req.destroy();
          ws.terminate();
        });
      });
      ws.on('open', () => {
        opened = true;
        ping = setInterval(() => {
          if (!alive) return ws.terminate();
          alive = false;
          ws.ping();
        }, PING_MS);
        this.#ws = ws;
        if (this.#stdinOpen && this.#o.tty) this.#stdin?.resume();
        // A resize missed while detached: the terminal may have changed in between.
        if (again && this.#o.tty) this.#resize();
      });
      ws.on('message', (data, isBinary) => {
        if (!isBinary) this.#event(ws, data.toString());
      });
      ws.on('error', (err) => {
        // Before the upgrade: nothing reached the server, as any request that cannot connect.
        if (!opened && !again && !refused)
          this.#finish({ error: new CliError(`cannot reach ${client.server}: ${err.message}`) });
      });
      ws.on('close', (code, why) => {
        clearInterval(ping);
        if (this.#ws === ws) this.#ws = null;
        if (this.#o.tty) this.#stdin?.pause();
        resolve({ reason: `${code}${why.length ? ` ${why.toString()}` : ''}` });
      });
    });
  }

  #event(ws: WebSocket, text: string): void {
    let e: ProcessStreamEventBody;
    try {
      e = JSON.parse(text) as ProcessStreamEventBody;
    } catch {
      return;
    }
    if (e.type === 'stdout' || e.type === 'stderr') {
      if (e.seq <= this.#lastSeq) return; // already written before a re-attach
      this.#lastSeq = e.seq;
      // The size again once the process surely runs: an engine before API 1.42 ignores the start's
      // size, and an older svcd sets it once right after the start, which the engine may refuse
      // while the exec is not running yet.
      if (this.#o.tty && !this.#sized) {
        this.#sized = true;
        this.#resize();
      }
      const target = e.type === 'stderr' && !this.#o.tty ? this.#err : this.#out;
      // Slow local output holds the socket back; the server marks what it then drops as a gap.
      if (!target.write(Buffer.from(e.data, 'base64'))) {
        ws.pause();
        target.once('drain', () => ws.resume());
      }
    } else if (e.type === 'gap') {
      if (e.to <= this.#lastSeq) return;
      this.#lastSeq = e.to;
      this.#err.write(gapNote(e.from, e.to, this.#o.tty));
    } else if (e.type === 'end') {
      this.#ended = true;
      const drained = () => {
        try {
          this.#finish({ code: exitCodeOf(this.#o.pid, e) });
        } catch (err) {
          this.#finish({ error: err as Error });
        }
      };
      if ((this.#out as { writableNeedDrain?: boolean }).writableNeedDrain) this.#out.once('drain', drained);
      else drained();
    } else if (e.type === 'error') {
      this.#note(`svc: ${e.error}`);
    }
  }

  #send(msg: object): boolean {
    const ws = this.#ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(msg));
    return true;
  }

  #resize(): void {
    this.#send({ type: 'resize', ...localSize() });
  }

  #listen(): void {
    // biome-ignore lint/suspicious/noExplicitAny: listeners of several emitters, each with its own arguments
    const on = (target: NodeJS.EventEmitter, event: string, fn: (...a: any[]) => void) => {
      target.on(event, fn);
      this.#cleanups.push(() => target.removeListener(event, fn));
    };
    if (this.#o.tty) on(process, 'SIGWINCH', () => this.#resize());
    for (const signal of SIGNALS) on(process, signal, () => this.#signal(signal));
    const stdin = this.#stdin;
    if (!stdin) return;
    if (this.#o.tty) {
      on(stdin, 'data', (d: Buffer) => {
        for (const c of chunks(d)) this.#send({ type: 'input', data: c.toString('base64') });
      });
      // The end of piped input is what it is on a terminal: Ctrl-D. (Closing a terminal's input
      // would end the exec's whole connection, output included.)
      on(stdin, 'end', () => {
        this.#stdinOpen = false;
        this.#send({ type: 'input', data: Buffer.from([4]).toString('base64') });
      });
      // Read once attached (open resumes it): typed keys wait in the terminal meanwhile.
      stdin.pause();
    } else {
      void this.#pipeStdin(stdin);
    }
  }

  /** Without a terminal: each chunk is POSTed and awaited, so a large file is sent at the pace the host takes it. */
  async #pipeStdin(stdin: Readable): Promise<void> {
    const { client, env, pid } = this.#o;
    const route = '/v1/envs/{env}/processes/{pid}/input';
    try {
      for await (const d of stdin as AsyncIterable<Buffer>) {
        for (const c of chunks(Buffer.from(d)))
          await client.call('post', route, { path: { env, pid }, json: { data: c.toString('base64') } });
      }
      await client.call('post', route, { path: { env, pid }, json: { close: true } });
    } catch {
      // The process stopped reading (it ended, or closed its stdin): its end says the rest.
    } finally {
      this.#stdinOpen = false;
    }
  }

  #signal(signal: (typeof SIGNALS)[number]): void {
    const name = signal.slice(3);
    const detach = this.#signalled || signal === 'SIGHUP';
    if (!this.#signalled) this.#send({ type: 'signal', signal: name });
    this.#signalled = true;
    if (!detach) {
      this.#note(`svc: passed ${signal} to ${this.#o.pid}; another signal detaches svc from it`);
      return;
    }
    this.#note(`svc: detached from ${this.#o.pid} after ${signal}; it may still run: svc ps ${this.#o.env}`);
    this.#finish({ code: 128 + constants.signals[signal] });
  }

  close(): void {
    for (const c of this.#cleanups.splice(0)) c();
    const ws = this.#ws;
    this.#ws = null;
    // A detach after a signal sent over the socket: close it gracefully so the signal goes out first.
    if (ws?.readyState === WebSocket.OPEN) ws.close(1000);
    else ws?.terminate();
    // What is still unread stays unread: a terminal is paused (the shell reads it next), a pipe
    // is let go so that reading it keeps nothing alive.
    if (this.#o.tty) this.#stdin?.pause();
    else this.#stdin?.destroy();
  }
}
