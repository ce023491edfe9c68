// A local stand-in for the VM cloud (Hetzner Cloud's public shapes, corpus hcloud__openapi__
// hcloud.json). "Booting" a server runs its cloud-init join for real: the /etc/svc/join.env that
// user_data writes is extracted into the machine's own directory and the real svcd joins with it
// (`--env-file`), with its own state and data dir, so provision → join → prepare runs end to end.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { svcdEnvFileArgs } from '../svcd.ts';
import { readBody } from './docker-box.ts';
import { closeLocal, Faults, listenLocal, sendJson } from './fault.ts';

export interface Machine {
  id: number;
  name: string;
  body: Record<string, unknown>;
  userData: string;
  joinEnv: string;
  runcmd: string[];
  dir: string;
  proc: ChildProcess | null;
  log: string;
}

const err = (res: ServerResponse, status: number, code: string, message: string) =>
  sendJson(res, status, { error: { code, message, details: null } });

export class FakeCloud {
  readonly token: string;
  readonly machines: Machine[] = [];
  readonly faults = new Faults();
  /** false: servers are created but never boot (their join never comes). */
  boots = true;
  url = '';
  #server: Server;
  #root = mkdtempSync(join(tmpdir(), 'svc-fake-cloud-'));

  constructor(token = randomBytes(24).toString('hex')) {
    this.token = token;
    this.#server = createServer((req, res) => {
      if (this.faults.hit(req, res)) return;
      void this.#route(req, res).catch((e) => err(res, 500, 'server_error', (e as Error).message));
    });
  }

  async listen(): Promise<this> {
    this.url = await listenLocal(this.#server);
    return this;
  }

  async close(): Promise<void> {
    await Promise.all(this.machines.map((m) => this.#halt(m)));
    await closeLocal(this.#server, this.faults);
    rmSync(this.#root, { recursive: true, force: true });
  }

  async #halt(m: Machine): Promise<void> {
    const p = m.proc;
    m.proc = null;
    if (!p || p.exitCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${this.token}`)
      return err(res, 401, 'unauthorized', 'unable to authenticate');
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/servers' && req.method === 'POST') return this.#create(req, res);
    if (url.pathname === '/servers' && req.method === 'GET')
      return sendJson(res, 200, { servers: this.machines.map((m) => this.#view(m)) });
    const m = this.machines.find((x) => url.pathname === `/servers/${x.id}`);
    if (m && req.method === 'DELETE') {
      await this.#halt(m);
      return sendJson(res, 200, { action: this.#action('delete_server', m.id) });
    }
    return err(res, 404, 'not_found', 'server not found');
  }

  #view(m: Machine) {
    return {
      id: m.id,
      name: m.name,
      status: m.proc ? 'running' : 'initializing',
      public_net: { ipv4: { ip: '127.0.0.1', blocked: false, dns_ptr: 'localhost' }, ipv6: null },
      server_type: { name: m.body.server_type },
      labels: m.body.labels ?? {},
    };
  }

  #action(command: string, id: number) {
    return {
      id: id * 10,
      command,
      status: 'running',
      progress: 0,
      started: new Date().toISOString(),
      finished: null,
      resources: [{ id, type: 'server' }],
      error: null,
    };
  }

  async #create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(req, 1 << 20)).toString() || '{}') as Record<string, unknown>;
    for (const k of ['name', 'server_type', 'image'])
      if (typeof body[k] !== 'string' || !body[k])
        return err(res, 422, 'invalid_input', `invalid input in field '${k}'`);
    if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(body.name as string))
      return err(res, 422, 'invalid_input', "invalid input in field 'name'");
    const userData = String(body.user_data ?? '');
    if (Buffer.byteLength(userData) > 32 * 1024) return err(res, 422, 'invalid_input', 'user_data too long');
    if (!userData.startsWith('#cloud-config\n'))
      return err(res, 422, 'invalid_input', 'user_data is not cloud-config');
    const cfg = parse(userData) as { write_files?: { path: string; content: string }[]; runcmd?: string[] };
    const joinEnv = cfg.write_files?.find((f) => f.path === '/etc/svc/join.env')?.content ?? '';
    const id = 1000 + this.machines.length + 1;
    const m: Machine = {
      id,
      name: body.name as string,
      body,
      userData,
      joinEnv,
      runcmd: (cfg.runcmd ?? []).map(String),
      dir: join(this.#root, String(id)),
      proc: null,
      log: '',
    };
    this.machines.push(m);
    if (this.boots) this.#boot(m);
    sendJson(res, 201, {
      server: this.#view(m),
      action: this.#action('create_server', id),
      next_actions: [this.#action('start_server', id)],
      root_password: null,
    });
  }

  /** cloud-init, for real: join.env lands on "the machine" and svcd joins with it. */
  #boot(m: Machine): void {
    mkdirSync(m.dir, { recursive: true });
    const envFile = join(m.dir, 'join.env');
    writeFileSync(envFile, m.joinEnv, { mode: 0o600 });
    const p = spawn(process.execPath, svcdEnvFileArgs(envFile, m.dir), { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer) => {
      m.log = (m.log + b.toString()).slice(-20_000);
    };
    p.stdout?.on('data', keep);
    p.stderr?.on('data', keep);
    m.proc = p;
  }
}
