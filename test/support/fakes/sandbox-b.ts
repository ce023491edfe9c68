// A local stand-in for sandbox-b (Daytona) that speaks its public shapes (corpus daytona__api-
// client-go__openapi.yaml and the toolbox spec) and is backed by real Docker containers. A new
// sandbox answers `creating` and turns `started` once its container runs, so drivers must poll.
// The toolbox is served under `toolboxProxyUrl` (`<url>/toolbox-proxy/{id}/...`) and under the
// API's own proxy path (`<url>/toolbox/{id}/toolbox/...`).
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createBox, execIn, FileError, readBody, readFileIn, removeBox, writeFileIn } from './docker-box.ts';
import { closeLocal, Faults, listenLocal, sendJson } from './fault.ts';

interface Sbx {
  id: string;
  container: string;
  state: string;
  image: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  networkBlockAll: boolean;
  errorReason?: string;
}

const err = (res: ServerResponse, statusCode: number, message: string) =>
  sendJson(res, statusCode, { statusCode, message, error: message });

export class FakeSandboxB {
  readonly token: string;
  readonly sandboxes = new Map<string, Sbx>();
  readonly faults = new Faults();
  /** When false the API answers without toolboxProxyUrl, so drivers use the API's toolbox path. */
  proxyUrl = true;
  /** Images the fake cannot "build" (the driver then falls back to a snapshot of that name). */
  unbuildable = new Set<string>();
  /** New sandboxes stay `creating` (no container), or end in `error` with this reason. */
  start: 'normal' | 'never' | { error: string } = 'normal';
  url = '';
  #server: Server;
  #pending = new Set<Promise<void>>();

  constructor(token = `dtn_${randomBytes(12).toString('hex')}`) {
    this.token = token;
    this.#server = createServer((req, res) => {
      if (this.faults.hit(req, res)) return;
      void this.#route(req, res).catch((e) =>
        e instanceof FileError ? err(res, e.status, e.message) : err(res, 500, (e as Error).message),
      );
    });
  }

  async listen(): Promise<this> {
    this.url = await listenLocal(this.#server);
    return this;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
    for (const s of this.sandboxes.values()) if (s.container) await removeBox(s.container);
    this.sandboxes.clear();
    await closeLocal(this.#server, this.faults);
  }

  #view(s: Sbx) {
    return {
      id: s.id,
      organizationId: 'org_fake',
      name: s.id,
      user: 'daytona',
      env: s.env,
      labels: s.labels,
      public: false,
      networkBlockAll: s.networkBlockAll,
      target: 'eu',
      cpu: 1,
      gpu: 0,
      memory: 1,
      disk: 3,
      state: s.state,
      ...(s.errorReason ? { errorReason: s.errorReason } : {}),
      toolboxProxyUrl: this.proxyUrl ? `${this.url}/toolbox-proxy` : '',
    };
  }

  async #route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${this.token}`) return err(res, 401, 'Invalid credentials');
    const url = new URL(req.url ?? '/', 'http://x');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] === 'toolbox-proxy') return this.#toolbox(req, res, parts[1], parts.slice(2), url);
    if (parts[0] === 'toolbox' && parts[2] === 'toolbox')
      return this.#toolbox(req, res, parts[1], parts.slice(3), url);
    if (parts[0] !== 'sandbox') return err(res, 404, 'Cannot find route');
    if (parts.length === 1 && req.method === 'GET') {
      const want = Object.entries(
        JSON.parse(url.searchParams.get('labels') || '{}') as Record<string, string>,
      );
      const list = [...this.sandboxes.values()].filter((s) => want.every(([k, v]) => s.labels[k] === v));
      return sendJson(
        res,
        200,
        list.map((s) => this.#view(s)),
      );
    }
    if (parts.length === 1 && req.method === 'POST') return this.#create(req, res);
    const s = this.sandboxes.get(parts[1] ?? '');
    if (!s) return err(res, 404, `Sandbox with ID or name ${parts[1]} not found`);
    if (parts.length === 2 && req.method === 'GET') return sendJson(res, 200, this.#view(s));
    if (parts.length === 2 && req.method === 'DELETE') {
      if (s.state !== 'started' && url.searchParams.get('force') !== 'true')
        return err(res, 400, 'Sandbox is not stopped; pass force=true');
      this.sandboxes.delete(s.id);
      if (s.container) await removeBox(s.container);
      return sendJson(res, 200, { ...this.#view(s), state: 'destroyed' });
    }
    return err(res, 404, 'Cannot find route');
  }

  async #create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(req, 1 << 20)).toString() || '{}');
    const fromBuild = /^FROM\s+(\S+)\s*$/.exec(String(body.buildInfo?.dockerfileContent ?? '').trim())?.[1];
    if (fromBuild && this.unbuildable.has(fromBuild)) return err(res, 400, `cannot build ${fromBuild}`);
    const image = fromBuild ?? body.snapshot;
    if (typeof image !== 'string' || !image) return err(res, 400, 'snapshot or buildInfo is required');
    const s: Sbx = {
      id: randomUUID(),
      container: '',
      state: 'creating',
      image,
      env: body.env ?? {},
      labels: body.labels ?? {},
      networkBlockAll: body.networkBlockAll === true,
    };
    this.sandboxes.set(s.id, s);
    if (this.start !== 'normal') {
      if (typeof this.start === 'object') [s.state, s.errorReason] = ['error', this.start.error];
      return sendJson(res, 200, this.#view(s));
    }
    // Started in the background, as the provider does: the answer says `creating`.
    const work = createBox('sbb', image, s.env, s.networkBlockAll)
      .then((id) => {
        s.container = id;
        if (this.sandboxes.has(s.id)) s.state = 'started';
        else void removeBox(id);
      })
      .catch((e) => {
        s.state = 'error';
        s.errorReason = `snapshot ${image} not found: ${(e as Error).message.slice(0, 200)}`;
      });
    this.#pending.add(work);
    void work.finally(() => this.#pending.delete(work));
    sendJson(res, 200, this.#view(s));
  }

  async #toolbox(
    req: IncomingMessage,
    res: ServerResponse,
    id: string | undefined,
    rest: string[],
    url: URL,
  ) {
    const s = this.sandboxes.get(id ?? '');
    if (!s) return err(res, 404, `Sandbox with ID or name ${id} not found`);
    if (s.state !== 'started') return err(res, 400, `Sandbox is not started (state ${s.state})`);
    const what = rest.join('/');
    if (what === 'process/execute' && req.method === 'POST') {
      const body = JSON.parse((await readBody(req, 1 << 20)).toString() || '{}');
      if (typeof body.command !== 'string') return err(res, 400, 'command is required');
      const r = await execIn(s.container, ['sh', '-c', body.command], { env: body.envs ?? {} });
      return sendJson(res, 200, {
        exitCode: r.exitCode,
        result: Buffer.concat([r.stdout, r.stderr]).toString(),
      });
    }
    const path = url.searchParams.get('path') ?? '';
    if (what === 'files/upload' && req.method === 'POST') {
      if (!path) return err(res, 400, 'path is required');
      const raw = await readBody(req);
      const form = await new Request('http://x', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type'] ?? '' },
        body: raw,
      }).formData();
      const file = form.get('file');
      if (!(file instanceof Blob)) return err(res, 400, 'file is required');
      await writeFileIn(s.container, path, Buffer.from(await file.arrayBuffer()));
      return sendJson(res, 200, { message: 'File uploaded successfully' });
    }
    if (what === 'files/download' && req.method === 'GET') {
      if (!path) return err(res, 400, 'path is required');
      const data = await readFileIn(s.container, path);
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end(data);
      return;
    }
    return err(res, 404, 'Cannot find route');
  }
}
