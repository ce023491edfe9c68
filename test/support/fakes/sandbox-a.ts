// A local stand-in for sandbox-a (E2B) that speaks its public shapes (corpus e2b__infra__spec__
// openapi.yml, envd.yaml, and process.proto through the Connect library) and is backed by real
// Docker containers: a sandbox is a container, exec really runs, files really land.
// envd is served on the same address in the SDK's routing mode (E2b-Sandbox-Id / -Port headers).
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { ProcessService, StartResponseSchema } from '../../../server/providers/envd-process.ts';
import {
  createBox,
  execIn,
  FileError,
  isPaused,
  readBody,
  readFileIn,
  removeBox,
  setPaused,
  writeFileIn,
} from './docker-box.ts';
import { closeLocal, Faults, listenLocal, sendJson } from './fault.ts';

interface Sbx {
  id: string;
  container: string;
  templateID: string;
  accessToken: string;
  startedAt: string;
  metadata: Record<string, string>;
  allowInternet: boolean;
  envVars: Record<string, string>;
}

const err = (res: ServerResponse, code: number, message: string) => sendJson(res, code, { code, message });

export class FakeSandboxA {
  readonly token: string;
  readonly sandboxes = new Map<string, Sbx>();
  readonly faults = new Faults();
  url = '';
  #server: Server;

  constructor(token = `e2b_${randomBytes(12).toString('hex')}`) {
    this.token = token;
    const connect = connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(ProcessService, {
          start: (req: unknown, ctx: HandlerContext) => this.#start(req, ctx),
          sendSignal: (req: unknown, ctx: HandlerContext) => this.#signal(req, ctx),
        } as never);
      },
      fallback: (rq, rs) => {
        const [req, res] = [rq as IncomingMessage, rs as ServerResponse];
        void this.#http(req, res).catch((e) => err(res, 500, (e as Error).message));
      },
    });
    this.#server = createServer((req, res) => {
      if (this.faults.hit(req, res)) return;
      connect(req, res);
    });
  }

  async listen(): Promise<this> {
    this.url = await listenLocal(this.#server);
    return this;
  }

  async close(): Promise<void> {
    for (const s of this.sandboxes.values()) await removeBox(s.container);
    this.sandboxes.clear();
    await closeLocal(this.#server, this.faults);
  }

  /** envd's auth: the sandbox named by the routing header, and its access token. */
  #envdSandbox(headers: Headers | IncomingMessage['headers']): Sbx {
    const get = (k: string) =>
      headers instanceof Headers
        ? (headers.get(k) ?? '')
        : String((headers as Record<string, unknown>)[k] ?? '');
    const s = this.sandboxes.get(get('e2b-sandbox-id'));
    if (!s || get('e2b-sandbox-port') !== '49983') throw new FileError(404, 'sandbox not found');
    if (get('x-access-token') !== s.accessToken) throw new FileError(401, 'invalid access token');
    return s;
  }

  async *#start(req: unknown, ctx: HandlerContext) {
    let s: Sbx;
    try {
      s = this.#envdSandbox(ctx.requestHeader);
    } catch (e) {
      throw new ConnectError(
        (e as Error).message,
        (e as FileError).status === 401 ? Code.Unauthenticated : Code.NotFound,
      );
    }
    const user = Buffer.from((ctx.requestHeader.get('authorization') ?? '').replace(/^Basic /, ''), 'base64')
      .toString()
      .replace(/:$/, '');
    const p = (req as { process: { cmd: string; args: string[]; envs: Record<string, string> } }).process;
    const queue: unknown[] = [];
    let wake = () => {};
    const push = (event: unknown) => {
      queue.push(create(StartResponseSchema, { event: { event } } as never));
      wake();
    };
    // The process's own pid in the sandbox, as envd reports it: the wrapper records it, then execs.
    const tag = randomBytes(6).toString('hex');
    const argv = ['/bin/sh', '-c', `echo $$ > /tmp/.envd-${tag}; exec "$@"`, 'sh', p.cmd, ...p.args];
    let finished = false;
    const done = execIn(s.container, argv, {
      user: user === 'root' ? '0' : user,
      env: p.envs,
      onData: (fd, b) =>
        push({ case: 'data', value: { output: { case: fd === 1 ? 'stdout' : 'stderr', value: b } } }),
    })
      .then((r) =>
        push({
          case: 'end',
          value: { exitCode: r.exitCode, exited: true, status: `exit status ${r.exitCode}` },
        }),
      )
      .catch((e) =>
        push({
          case: 'end',
          value: { exitCode: -1, exited: false, status: 'error', error: (e as Error).message },
        }),
      )
      .finally(() => {
        finished = true;
        wake();
      });
    const pid = await this.#pidOf(s, tag);
    this.pids.set(pid, s.id);
    push({ case: 'start', value: { pid } });
    for (;;) {
      while (queue.length) yield queue.shift() as never;
      if (finished) break;
      await new Promise<void>((r) => {
        wake = r;
      });
    }
    await done;
  }

  /** Sandbox id by the pids Start reported (what SendSignal selects). */
  readonly pids = new Map<number, string>();

  async #pidOf(s: Sbx, tag: string): Promise<number> {
    for (let i = 0; i < 100; i++) {
      const r = await execIn(s.container, ['cat', `/tmp/.envd-${tag}`]);
      const pid = Number(r.stdout.toString().trim());
      if (r.exitCode === 0 && pid > 0) return pid;
      await new Promise((res) => setTimeout(res, 20));
    }
    return 0;
  }

  async #signal(req: unknown, ctx: HandlerContext) {
    const s = this.#envdSandbox(ctx.requestHeader);
    const r = req as { process: { selector: { case: string; value: number } }; signal: number };
    const pid = r.process.selector.case === 'pid' ? r.process.selector.value : 0;
    if (this.pids.get(pid) !== s.id) throw new ConnectError(`process ${pid} not found`, Code.NotFound);
    const k = await execIn(s.container, ['kill', `-${r.signal || 15}`, String(pid)]);
    if (k.exitCode !== 0) throw new ConnectError(k.stderr.toString().trim(), Code.Internal);
    this.signals.push({ pid, signal: r.signal });
    return {};
  }

  readonly signals: { pid: number; signal: number }[] = [];

  async #http(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/files') return this.#files(req, res, url);
    if (req.headers['x-api-key'] !== this.token)
      return err(res, 401, 'Invalid API key, it must start with e2b_');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'sandboxes') return err(res, 404, 'not found');
    if (parts.length === 1 && req.method === 'GET') {
      const want = [...new URLSearchParams(url.searchParams.get('metadata') ?? '')];
      return sendJson(
        res,
        200,
        [...this.sandboxes.values()]
          .filter((s) => want.every(([k, v]) => s.metadata[k] === v))
          .map((s) => ({
            templateID: s.templateID,
            sandboxID: s.id,
            clientID: 'fake',
            startedAt: s.startedAt,
            metadata: s.metadata,
          })),
      );
    }
    if (parts.length === 1 && req.method === 'POST') return this.#create(req, res);
    const s = this.sandboxes.get(parts[1] ?? '');
    if (!s) return err(res, 404, `sandbox "${parts[1]}" not found`);
    if (parts.length === 2 && req.method === 'DELETE') {
      this.sandboxes.delete(s.id);
      await removeBox(s.container);
      return sendJson(res, 204, undefined);
    }
    if (parts.length === 2 && req.method === 'GET') {
      const paused = await isPaused(s.container);
      return sendJson(res, 200, {
        ...this.#sandbox(s),
        state: paused ? 'paused' : 'running',
        startedAt: s.startedAt,
      });
    }
    if (parts[2] === 'pause' && req.method === 'POST') {
      if (await isPaused(s.container)) return err(res, 409, `sandbox "${s.id}" is already paused`);
      await setPaused(s.container, true);
      return sendJson(res, 204, undefined);
    }
    if (parts[2] === 'connect' && req.method === 'POST') {
      const body = JSON.parse((await readBody(req)).toString() || '{}');
      if (typeof body.timeout !== 'number') return err(res, 400, 'timeout is required');
      const paused = await isPaused(s.container);
      if (paused) await setPaused(s.container, false);
      return sendJson(res, paused ? 201 : 200, this.#sandbox(s));
    }
    return err(res, 404, 'not found');
  }

  #sandbox(s: Sbx) {
    return {
      templateID: s.templateID,
      sandboxID: s.id,
      clientID: 'fake',
      envdVersion: '0.2.0',
      envdAccessToken: s.accessToken,
      domain: null,
    };
  }

  async #create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(req, 1 << 20)).toString() || '{}');
    if (typeof body.templateID !== 'string' || !body.templateID)
      return err(res, 400, 'templateID is required');
    let container: string;
    try {
      container = await createBox(
        'sba',
        body.templateID,
        body.envVars ?? {},
        body.allow_internet_access === false,
      );
    } catch (e) {
      return err(res, 400, `template '${body.templateID}' not found: ${(e as Error).message.slice(0, 200)}`);
    }
    const s: Sbx = {
      id: `i${randomBytes(8).toString('hex')}`,
      container,
      templateID: body.templateID,
      accessToken: randomBytes(16).toString('hex'),
      startedAt: new Date().toISOString(),
      metadata: body.metadata ?? {},
      allowInternet: body.allow_internet_access !== false,
      envVars: body.envVars ?? {},
    };
    this.sandboxes.set(s.id, s);
    sendJson(res, 201, this.#sandbox(s));
  }

  async #files(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    try {
      const s = this.#envdSandbox(req.headers);
      const path = url.searchParams.get('path') ?? '';
      if (!path) throw new FileError(400, 'path is required');
      const user = url.searchParams.get('username') ?? 'user';
      const abs = path.startsWith('/') ? path : `${user === 'root' ? '/root' : `/home/${user}`}/${path}`;
      if (req.method === 'POST') {
        if (!(req.headers['content-type'] ?? '').startsWith('application/octet-stream'))
          throw new FileError(400, 'this fake takes application/octet-stream uploads');
        await writeFileIn(s.container, abs, await readBody(req));
        return sendJson(res, 200, [{ path: abs, name: abs.split('/').pop(), type: 'file' }]);
      }
      if (req.method === 'GET') {
        const data = await readFileIn(s.container, abs);
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(data);
        return;
      }
      throw new FileError(405, 'method not allowed');
    } catch (e) {
      if (e instanceof FileError) return err(res, e.status, e.message);
      throw e;
    }
  }
}
