// `--wait`: only a non-null `FinishedAt` or a final status ends the wait. A deployment record
// that omits `FinishedAt` (or carries null) is still running, whatever else it says.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import type { Output } from './command.ts';
import { Client } from './http.ts';
import { pollDelay, watchDeployment } from './wait.ts';

const phase = (Name: string, Status: string) => ({
  Seq: 1,
  Name,
  Status,
  Evidence: null,
  Error: '',
  StartedAt: null,
  FinishedAt: null,
});
const base = { ID: 'dep_1', EnvID: 'env_1', Kind: 'snapshot', VersionID: 'ver_1', Error: '' };

/** A control plane that answers GET /v1/deployments/dep_1 with each view in turn (the last repeats). */
async function serving(views: object[]): Promise<{ url: string; polls: () => number; close: () => void }> {
  let polls = 0;
  const server = createServer((req, res) => {
    assert.equal(req.url, '/v1/deployments/dep_1');
    const view = views[Math.min(polls++, views.length - 1)];
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(view));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, polls: () => polls, close: () => server.close() };
}

function capture(): Output & { text: () => string } {
  let all = '';
  return {
    out: (t) => {
      all += t;
    },
    err: (t) => {
      all += t;
    },
    json: (v) => {
      all += JSON.stringify(v);
    },
    tty: false,
    text: () => all,
  };
}

test('a running deployment without FinishedAt (absent or null) is waited on until it ends', async () => {
  const cp = await serving([
    { deployment: { ...base, Status: 'running' }, phases: [phase('snapshot', 'running')] },
    {
      deployment: { ...base, Status: 'running', FinishedAt: null },
      phases: [phase('snapshot', 'ok'), phase('health', 'running')],
    },
    {
      deployment: { ...base, Status: 'succeeded', FinishedAt: '2026-01-01T00:00:00Z' },
      phases: [phase('snapshot', 'ok'), phase('health', 'ok'), phase('verdict', 'ok')],
    },
  ]);
  try {
    const io = capture();
    const code = await watchDeployment(new Client(cp.url, 'dak_x'), io, 'dep_1');
    assert.equal(code, 0, io.text());
    assert.equal(cp.polls(), 3);
    assert.match(io.text(), /deployment dep_1: succeeded\n$/);
    assert.deepEqual(
      io
        .text()
        .split('\n')
        .filter((l) => l.startsWith('  '))
        .map((l) => l.trim().split(/\s+/).slice(0, 2)),
      [
        ['snapshot', 'ok'],
        ['health', 'ok'],
        ['verdict', 'ok'],
      ],
    );
  } finally {
    cp.close();
  }
});

test('a final status ends the wait even when FinishedAt is absent; so does a non-null FinishedAt', async () => {
  for (const [deployment, want] of [
    [{ ...base, Status: 'failed', Error: 'snapshot: pause failed' }, 1],
    [{ ...base, Status: 'running', FinishedAt: '2026-01-01T00:00:00Z' }, 1],
    [{ ...base, Status: 'succeeded' }, 0],
  ] as const) {
    const cp = await serving([{ deployment, phases: [phase('snapshot', 'failed')] }]);
    try {
      const code = await watchDeployment(new Client(cp.url, 'dak_x'), capture(), 'dep_1');
      assert.equal(code, want, JSON.stringify(deployment));
      assert.equal(cp.polls(), 1);
    } finally {
      cp.close();
    }
  }
});

test('polls soon after the start, then less often, never less often than every 700 ms', () => {
  assert.deepEqual(
    Array.from({ length: 7 }, (_, n) => pollDelay(n)),
    [50, 100, 200, 400, 700, 700, 700],
  );
  assert.equal(pollDelay(10_000), 700);
});
