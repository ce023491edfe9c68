// Helpers of the file API's end-to-end tests: requests with the bootstrap key, a reader running
// inside a container, and the events of an SSE answer.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { request } from 'node:http';
import type { Real } from './real.ts';

export type Body = RequestInit['body'];

/** Requests to /v1/envs/{env}/fs… of the environment `env()` on `r()`. */
export function fsClient(r: () => Real, env: () => string) {
  const url = (route: string, q: Record<string, string>) =>
    `${r().t.url}/v1/envs/${env()}/fs${route}?${new URLSearchParams(q)}`;
  const auth = () => ({ authorization: `Bearer ${r().t.key}` });
  return {
    url,
    auth,
    put: (
      service: string,
      path: string,
      body: Body,
      extra: Record<string, string> = {},
      signal?: AbortSignal,
    ) =>
      fetch(url('', { service, path, ...extra }), {
        method: 'PUT',
        headers: { ...auth(), 'content-type': 'application/octet-stream' },
        body,
        duplex: 'half',
        signal,
      } as RequestInit),
    get: (service: string, path: string, signal?: AbortSignal) =>
      fetch(url('', { service, path }), { headers: auth(), signal }),
    json: async (res: Response): Promise<{ status: number; body: any }> => ({
      status: res.status,
      body: await res.json(),
    }),
    api: (method: string, route: string, q: Record<string, string>) =>
      fetch(url(route, q), { method, headers: auth() }),
    fetchJson: (method: string, route: string, body: unknown) =>
      fetch(`${r().t.url}/v1/envs/${env()}/fs${route}`, {
        method,
        headers: { ...auth(), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
  };
}

/** The container of a service of an environment (compose labels). */
export function containerOf(envId: string, service: string): string {
  return execFileSync(
    'docker',
    [
      'ps',
      '-q',
      '--filter',
      `label=com.docker.compose.project=${envId.toLowerCase()}`,
      '--filter',
      `label=com.docker.compose.service=${service}`,
    ],
    { encoding: 'utf8' },
  ).trim();
}

/** md5 of `path` read over and over inside the container until stopped. */
export function readerLoop(container: string, path: string) {
  const stop = '/data/.stop-reader';
  const child: ChildProcess = spawn('docker', [
    'exec',
    container,
    'sh',
    '-c',
    `rm -f ${stop}; while [ ! -e ${stop} ]; do md5sum ${path}; done`,
  ]);
  let out = '';
  let errors = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (errors += d));
  return {
    async stop() {
      const gone = new Promise((res) => child.once('exit', res));
      execFileSync('docker', ['exec', container, 'touch', stop]);
      await gone;
      const sums = out
        .split('\n')
        .filter((l) => / /.test(l))
        .map((l) => l.split(' ')[0]);
      return { sums, errors };
    },
  };
}

/** The `data:` events of an SSE answer, one at a time. */
export function sse(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buf = '';
  const queue: unknown[] = [];
  return {
    async next(): Promise<unknown> {
      for (;;) {
        if (queue.length) return queue.shift();
        const { value, done } = await reader.read();
        if (done) throw new Error('the event stream ended');
        buf += decoder.decode(value, { stream: true });
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          for (const line of block.split('\n'))
            if (line.startsWith('data: ')) queue.push(JSON.parse(line.slice(6)));
        }
      }
    },
    close: () => reader.cancel(),
  };
}

/** A PUT that declares `declared` bytes, sends `sent`, then drops its connection. */
export function cutWrite(
  url: string,
  headers: Record<string, string>,
  declared: number,
  sent: number,
): Promise<void> {
  return new Promise((resolve) => {
    const req = request(url, {
      method: 'PUT',
      headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(declared) },
    });
    req.on('error', () => resolve());
    req.on('response', (res) => {
      res.resume();
      resolve();
    });
    req.write(Buffer.alloc(sent, 'w'), () => {
      req.destroy();
      resolve();
    });
  });
}
