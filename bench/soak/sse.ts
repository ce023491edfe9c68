// Honest followers of the live event stream (GET /v1/events/stream), as the console and
// `svc logs -f` hold them: each reads everything, stays a while, leaves, and comes back. A
// stream the server ends or breaks before the follower leaves is recorded as unexpected.
import { request } from 'node:http';
import type { Recorder } from './record.ts';

export interface Followers {
  events(): number;
  stop(): Promise<void>;
}

/** `up()` false: the control plane is being restarted; followers wait instead of failing. */
export function follow(
  url: string,
  key: string,
  n: number,
  rec: Recorder,
  stayMs: [number, number],
  up: () => boolean,
): Followers {
  const { hostname, port } = new URL(url);
  let stopping = false;
  let events = 0;
  const loops: Promise<void>[] = [];
  const current = new Set<() => void>();
  const once = () =>
    new Promise<boolean>((resolve) => {
      const t0 = performance.now();
      const stay = stayMs[0] + Math.random() * (stayMs[1] - stayMs[0]);
      let left = false;
      let status = 0;
      const req = request({
        hostname,
        port,
        path: '/v1/events/stream',
        headers: { authorization: `Bearer ${key}` },
        agent: false,
      });
      const leave = () => {
        left = true;
        req.destroy();
      };
      current.add(leave);
      const timer = setTimeout(leave, stay);
      let ended = false;
      const end = (how: string) => {
        if (ended) return;
        ended = true;
        clearTimeout(timer);
        current.delete(leave);
        const ms = performance.now() - t0;
        if (status !== 200)
          rec.note(
            'sse.follow',
            'work',
            status >= 500 ? 'unexpected-5xx' : status ? 'unexpected-4xx' : 'unexpected-network',
            ms,
            `${status || how}`,
          );
        else
          rec.note(
            'sse.follow',
            'work',
            left ? 'ok' : 'unexpected-network',
            ms,
            `200 ${left ? 'left' : `ended by the server: ${how}`}`,
          );
        resolve(status === 200 && left);
      };
      req.on('response', (res) => {
        status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          for (const line of chunk.split('\n')) if (line.startsWith('data:')) events++;
        });
        res.on('end', () => end('end'));
        res.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? err.message));
        res.on('close', () => end('close'));
      });
      req.on('error', (err: NodeJS.ErrnoException) => end(err.code ?? err.message));
      req.end();
    });
  for (let i = 0; i < n; i++)
    loops.push(
      (async () => {
        // A failed stream is retried after a second, not in a tight loop while the server is down.
        while (!stopping) {
          if (!up()) await new Promise((r) => setTimeout(r, 1000));
          else if (!(await once())) await new Promise((r) => setTimeout(r, 1000));
        }
      })(),
    );
  return {
    events: () => events,
    async stop() {
      stopping = true;
      for (const leave of [...current]) leave();
      await Promise.all(loops);
    },
  };
}
