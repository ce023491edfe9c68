// Failure injection shared by the provider fakes: the next call matching a method and path
// prefix answers with a status and the provider's error body, or never answers at all.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface Fault {
  method: string;
  /** The request path starts with this. */
  path: string;
  /** `hang`: hold the request open without answering (a provider that times out). */
  status: number | 'hang';
  body?: unknown;
  /** How many calls it hits (default 1). */
  times?: number;
}

export class Faults {
  #list: Fault[] = [];
  #hung: ServerResponse[] = [];
  readonly calls: { method: string; path: string; query: string; headers: IncomingMessage['headers'] }[] = [];

  add(f: Fault): void {
    this.#list.push({ times: 1, ...f });
  }

  clear(): void {
    this.#list = [];
  }

  /** Records the call; true when a fault answered it (the caller must then stop). */
  hit(req: IncomingMessage, res: ServerResponse): boolean {
    const [path, query = ''] = (req.url ?? '').split('?');
    this.calls.push({ method: req.method ?? '', path, query, headers: req.headers });
    const f = this.#list.find(
      (x) => x.method === req.method && path.startsWith(x.path) && (x.times ?? 1) > 0,
    );
    if (!f) return false;
    f.times = (f.times ?? 1) - 1;
    if (f.status === 'hang') {
      this.#hung.push(res);
      return true;
    }
    res.writeHead(f.status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(f.body ?? {}));
    return true;
  }

  release(): void {
    for (const r of this.#hung.splice(0)) r.destroy();
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(body === undefined ? '' : JSON.stringify(body));
}

/** Listens on a random loopback port; returns the base URL. */
export async function listenLocal(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** Ends hung calls and open connections, then stops listening. */
export async function closeLocal(server: Server, faults: Faults): Promise<void> {
  faults.release();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}
