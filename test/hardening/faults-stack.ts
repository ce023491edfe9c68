// The fault suite's stack: the real svc-server program as a child process on a fixed
// port and one SQLite file (so it can be SIGKILLed and started again on the same database), the
// real svcd with its test hold hook (sidecar/test-hold.ts) dialling through a TCP proxy the test
// can cut, and real Docker. Nothing here sleeps to "let something happen": every wait is for an
// observable line, row or answer, bounded only so a hang fails instead of stalling CI.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { primaryIp } from '../e2e/real.ts';
import { svcdJoinArgs } from '../support/svcd.ts';

export interface Res {
  status: number;
  body: any;
}

/** Polls `cond` until it holds; throws `what` (with the logs) if it does not within `ms`. */
export async function until<T>(
  cond: () => T | Promise<T>,
  what: string,
  ms = 120_000,
): Promise<NonNullable<T>> {
  const start = Date.now();
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

export class FaultStack {
  readonly dir = mkdtempSync(join(tmpdir(), 'svc-faults-'));
  readonly dataDir = join(this.dir, 'data');
  readonly dbPath = join(this.dir, 'svc.db');
  readonly key = `dak_faults${randomBytes(16).toString('hex')}`;
  port = 0;
  server: ChildProcess | null = null;
  sidecar: ChildProcess | null = null;
  serverLog = '';
  sidecarLog = '';
  #proxy: Server | null = null;
  #proxyPort = 0;
  #pipes = new Set<Socket>();
  #listener: Server | null = null;
  #probe = '';
  #token = '';

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.port = await freePort();
    this.#proxy = createServer((client) => {
      const upstream = connect(this.port, '127.0.0.1');
      for (const [a, b] of [
        [client, upstream],
        [upstream, client],
      ]) {
        this.#pipes.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => {
          this.#pipes.delete(a);
          b.destroy();
        });
        a.pipe(b);
      }
    });
    await new Promise<void>((r) => this.#proxy?.listen(0, '127.0.0.1', () => r()));
    this.#proxyPort = (this.#proxy.address() as { port: number }).port;
    // "The internet" for the sidecar's egress probe: a deny stack must not reach it.
    this.#listener = createServer((s) => {
      s.on('error', () => {});
      s.end('hello\n');
    });
    await new Promise<void>((r) => this.#listener?.listen(0, '0.0.0.0', () => r()));
    this.#probe = `${primaryIp()}:${(this.#listener.address() as { port: number }).port}`;
    await this.startServer();
    const jt = await this.req('POST', '/v1/join-tokens', {});
    if (jt.status !== 201) throw new Error(`join token: ${JSON.stringify(jt.body)}`);
    this.#token = jt.body.token;
    await this.startSidecar();
  }

  async req(method: string, path: string, body?: unknown, raw?: Buffer): Promise<Res> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (raw) headers['content-type'] = 'application/x-tar';
    const r = await fetch(this.url + path, {
      method,
      headers,
      body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await r.text();
    const json = (r.headers.get('content-type') ?? '').includes('json') && text ? JSON.parse(text) : text;
    return { status: r.status, body: json };
  }

  /**
   * Starts svc-server on `port`. Another test may take that port between freePort() and the listen
   * (or while the server is down for a restart): then it starts on a fresh port (the sidecar reaches
   * the server through the proxy, which follows `port`).
   */
  async startServer(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#startServerOnce();
      } catch (err) {
        if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
        this.port = await freePort();
      }
    }
  }

  async #startServerOnce(): Promise<void> {
    const child = spawn(
      process.execPath,
      ['programs/svc-server.ts', '-addr', `127.0.0.1:${this.port}`, '-db', this.dbPath],
      {
        env: { ...process.env, SVC_BOOTSTRAP_KEY: this.key, SVC_PUBLIC_URL: this.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout?.on('data', (d) => (this.serverLog += d));
    child.stderr?.on('data', (d) => (this.serverLog += d));
    this.server = child;
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`svc-server exited:\n${this.serverLog.slice(-4000)}`);
      return fetch(`${this.url}/health`).then(
        (r) => r.ok,
        () => false,
      );
    }, 'svc-server to answer /health');
  }

  async killServer(): Promise<void> {
    await kill(this.server, 'SIGKILL');
  }

  async startSidecar(): Promise<void> {
    const from = this.sidecarLog.length;
    const args = svcdJoinArgs(`http://127.0.0.1:${this.#proxyPort}`, this.#token, this.dir, this.dataDir);
    const child = spawn(process.execPath, args, {
      env: { ...process.env, SVC_EGRESS_PROBE: this.#probe, SVC_TEST_HOOKS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (d) => (this.sidecarLog += d));
    child.stderr?.on('data', (d) => (this.sidecarLog += d));
    this.sidecar = child;
    await until(() => {
      if (child.exitCode !== null) throw new Error(`svcd exited:\n${this.sidecarLog.slice(-4000)}`);
      return /connected to /.test(this.sidecarLog.slice(from));
    }, 'svcd to connect');
  }

  async killSidecar(): Promise<void> {
    await kill(this.sidecar, 'SIGKILL');
  }

  /** Arms the sidecar's hook: the next command of `kind` stops once its handler is done. */
  hold(kind: string): number {
    writeFileSync(join(this.dataDir, 'test-hold'), kind);
    return this.sidecarLog.length;
  }

  /** Waits for the held command's log line; returns its command id. */
  async held(kind: string, from: number): Promise<string> {
    const re = new RegExp(`test hook: holding ${kind.replace('.', '\\.')} (\\S+)`);
    const m = await until(() => re.exec(this.sidecarLog.slice(from)), `svcd to hold ${kind}`);
    return m[1];
  }

  /** Lets held commands go on (SIGUSR2). */
  release(): void {
    this.sidecar?.kill('SIGUSR2');
  }

  /** Cuts the sidecar's stream (both TCP halves) without a close handshake. */
  dropStream(): number {
    const from = this.sidecarLog.length;
    for (const s of this.#pipes) s.destroy();
    return from;
  }

  async reconnected(from: number): Promise<void> {
    await until(() => /connected to /.test(this.sidecarLog.slice(from)), 'svcd to reconnect');
  }

  /** A read-only query on the control plane's database file (WAL: safe beside the server). */
  query<T>(sql: string, ...params: SQLInputValue[]): T[] {
    const db = new DatabaseSync(this.dbPath, { readOnly: true });
    try {
      return db.prepare(sql).all(...params) as T[];
    } finally {
      db.close();
    }
  }

  /** Command ids the sidecar is still running (its crash markers). */
  runningOnHost(): string[] {
    const dir = join(this.dataDir, 'commands');
    return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.running')) : [];
  }

  hostResult(commandId: string): boolean {
    return existsSync(join(this.dataDir, 'commands', `${commandId}.json`));
  }

  /** Environment ids that have datasets or snapshots on the host. */
  envDirs(): string[] {
    const ids = ['envs', 'snaps'].flatMap((d) => {
      const dir = join(this.dataDir, d);
      return existsSync(dir) ? readdirSync(dir) : [];
    });
    return [...new Set(ids)];
  }

  async close(): Promise<void> {
    rmSync(join(this.dataDir, 'test-hold'), { force: true });
    this.release();
    await kill(this.sidecar, 'SIGTERM');
    await kill(this.server, 'SIGTERM');
    this.#proxy?.close();
    this.#listener?.close();
    for (const s of this.#pipes) s.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function kill(child: ChildProcess | null, signal: NodeJS.Signals): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await gone;
}
