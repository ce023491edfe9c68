import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocketServer } from 'ws';
import type { Capabilities } from '../protocol/commands.ts';
import { frame, STREAM_PATH } from '../protocol/frames.ts';
import { backoff, Link } from './link.ts';

test('reconnect backoff doubles from 1 s and never leaves the spec window of 1 s to 30 s, jitter included', () => {
  for (let attempt = 0; attempt < 12; attempt++) {
    for (let i = 0; i < 200; i++) {
      const ms = backoff(attempt);
      assert.ok(ms >= 1000 && ms <= 30_000, `attempt ${attempt}: ${ms} ms`);
      const base = Math.min(30_000, 1000 * 2 ** attempt);
      assert.ok(ms >= base || base >= 30_000, `attempt ${attempt}: ${ms} ms below ${base}`);
    }
  }
  assert.ok(backoff(0) < 1300 && backoff(10) >= 30_000 * 0.999);
});

test('with several control-plane URLs, a reconnect tries the next: a dead replica is left for a live one', async () => {
  // A port that refuses (bound, then closed) and a stream endpoint that answers the hello.
  const dead = createServer();
  await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
  const deadPort = (dead.address() as AddressInfo).port;
  await new Promise((r) => dead.close(r));
  const live = new WebSocketServer({ host: '127.0.0.1', port: 0, path: STREAM_PATH });
  await once(live, 'listening');
  const livePort = (live.address() as AddressInfo).port;
  live.on('connection', (ws) =>
    ws.on('message', () =>
      ws.send(JSON.stringify(frame('hello', { host_id: 'h_1', payload: { host_id: 'h_1', secret: 's' } }))),
    ),
  );
  const logs: string[] = [];
  const link = new Link({
    server: `http://127.0.0.1:${deadPort},http://127.0.0.1:${livePort}`,
    identity: () => ({ host_id: 'h_1', secret: 's' }),
    token: '',
    capabilities: async () => ({}) as Capabilities,
    onIdentity: () => {},
    onCommand: () => {},
    log: (m) => logs.push(m),
  });
  const running = link.run();
  try {
    for (let i = 0; i < 100 && link.state !== 'connected'; i++) await sleep(100);
    assert.equal(link.state, 'connected', logs.join('\n'));
    assert.ok(
      logs.some((l) => l.includes(`connected to http://127.0.0.1:${livePort}`)),
      logs.join('\n'),
    );
  } finally {
    link.stop();
    await running;
    live.close();
  }
});
