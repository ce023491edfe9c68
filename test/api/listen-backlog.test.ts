// The API listener's accept queue is as long as the kernel allows up to LISTEN_BACKLOG, not Node's
// 511: after a replica dies, its hosts (thousands) dial a survivor within a quarter second, and the
// connections a full queue turns away wait on the kernel's retransmits. The queue's length is what
// `ss` reports as Send-Q for a listening socket.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { LISTEN_BACKLOG } from '../../server/main.ts';
import { startTestServer } from '../support/server.ts';

test('the API listener queues up to LISTEN_BACKLOG connections (or the kernel cap), not 511', async () => {
  const t = await startTestServer('sqlite');
  try {
    const port = new URL(t.url).port;
    const line = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim();
    // State, Recv-Q, Send-Q (the queue's length), local address, peer address.
    const queue = Number(line.split(/\s+/)[2]);
    const cap = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    assert.equal(queue, Math.min(LISTEN_BACKLOG, cap), `ss said: ${line}`);
    if (cap > 511) assert.ok(queue > 511, 'longer than the default queue');
  } finally {
    await t.close();
  }
});
