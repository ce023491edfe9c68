// Hostile host-stream frames for the soak, from the stream fuzz suite's generator: first frames on
// fresh streams (each must close with 1008), and stray frames on a joined host's stream (a
// refusal closes with 1008; nothing else may happen).

import { WebSocket } from 'ws';
import { frame } from '../../protocol/frames.ts';
import { EVENTS_PER_SEC } from '../../server/hosts/stream-limits.ts';
import { closeOf, dial, helloAs, wire } from '../../test/hardening/support/frame-gen.ts';
import { draw as sample } from '../../test/hardening/support/fuzz.ts';
import { client, sleep } from './http.ts';
import type { Recorder } from './record.ts';

const FRAME_WAIT_MS = 30_000;

/** Fresh streams whose first frame is hostile: each must close with 1008. */
export async function badFirstFrames(url: string, rec: Recorder, n: number) {
  for (const w of sample(wire, n)) {
    const t0 = performance.now();
    try {
      const ws = await dial(url);
      const closed = closeOf(ws);
      ws.send(w.data, { binary: w.binary });
      const code = await Promise.race([
        closed,
        new Promise<number>((r) => setTimeout(() => r(-2), FRAME_WAIT_MS)),
      ]);
      if (code === -2) ws.terminate();
      const ok = code === 1008;
      rec.note(
        'h.frame',
        'hostile',
        ok ? 'expected' : 'unexpected-other',
        performance.now() - t0,
        `close:${code}`,
      );
    } catch (err) {
      rec.note(
        'h.frame',
        'hostile',
        'unexpected-network',
        performance.now() - t0,
        `dial ${(err as Error).message}`,
      );
    }
  }
}

/** Stray frames from a joined host of another team: refusals close with 1008, never another code. */
export async function strayFrames(
  url: string,
  host: { id: string; secret: string },
  rec: Recorder,
  n: number,
) {
  let ws: WebSocket | null = null;
  const t0 = performance.now();
  const closes: number[] = [];
  for (const w of sample(wire, n)) {
    try {
      if (!ws || ws.readyState !== WebSocket.OPEN) {
        ws = await helloAs(url, host.id, host.secret);
        ws.on('close', (code) => closes.push(code));
      }
      ws.send(w.data, { binary: w.binary });
      await new Promise((r) => setTimeout(r, 5));
    } catch (err) {
      rec.note(
        'h.frame.joined',
        'hostile',
        'unexpected-network',
        performance.now() - t0,
        `${(err as Error).message}`,
      );
    }
  }
  if (ws && ws.readyState !== WebSocket.CLOSED) {
    const last = ws;
    const closed = new Promise((r) => last.once('close', r));
    last.close(1000);
    await Promise.race([closed, new Promise((r) => setTimeout(r, 10_000))]);
  }
  for (const code of closes) {
    const ok = code === 1008 || code === 1000 || code === 1005;
    rec.note(
      'h.frame.joined',
      'hostile',
      ok ? 'expected' : 'unexpected-other',
      performance.now() - t0,
      `close:${code}`,
    );
  }
}

/**
 * A joined host sending events at the allowed rate (20/s of 60 KiB) for `seconds`, while
 * `/health` is timed every second: every event reaches every event stream of its team, so this
 * is what the stream fan-out costs (the caller holds streams of that team open meanwhile).
 */
export async function eventFlood(
  url: string,
  host: { id: string; secret: string },
  rec: Recorder,
  seconds: number,
) {
  const t0 = performance.now();
  let ws: WebSocket;
  try {
    ws = await helloAs(url, host.id, host.secret);
  } catch (err) {
    rec.note(
      'h.events.flood',
      'hostile',
      'unexpected-network',
      performance.now() - t0,
      `${(err as Error).message}`,
    );
    return;
  }
  let code = 0;
  ws.on('close', (c) => {
    code = c;
  });
  const blob = 'x'.repeat(60 * 1024);
  const health = client(url, '');
  for (let s = 0; s < seconds && ws.readyState === WebSocket.OPEN; s++) {
    for (let i = 0; i < EVENTS_PER_SEC; i++)
      ws.send(JSON.stringify(frame('event', { kind: 'soak', payload: { blob } })));
    const [h] = await Promise.all([health.call('GET', '/health', { token: false }), sleep(1000)]);
    rec.add('h.events.flood /health', 'work', h);
  }
  ws.close(1000);
  await Promise.race([new Promise((r) => ws.once('close', r)), sleep(10_000)]);
  const ok = code === 1000 || code === 1005 || code === 1008;
  rec.note(
    'h.events.flood',
    'hostile',
    ok ? 'expected' : 'unexpected-other',
    performance.now() - t0,
    `close:${code}`,
  );
}
