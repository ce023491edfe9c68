// attach() against a scripted WebSocket server in-process: output written in order to stdout and
// stderr, a gap shown as one note, the exit code returned, a stream dropped before its end
// re-attached with `since` and nothing written twice, and a refused upgrade as the server's error.
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { createServer, type Server } from 'node:http';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { type WebSocket, WebSocketServer } from 'ws';
import { CliError } from './errors.ts';
import { Client } from './http.ts';
import { attach } from './live.ts';

type Script = (ws: WebSocket, req: IncomingMessage, n: number) => void;

let server: Server;
let url = '';
let script: Script = () => {};
let connections: { url: string; auth: string | undefined }[] = [];

before(async () => {
  server = createServer((_req, res) => res.end());
  const wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (req.url?.includes('/processes/proc_refused/')) {
      const body = JSON.stringify({ error: 'no such process: proc_refused' });
      socket.end(
        `HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      connections.push({ url: req.url ?? '', auth: req.headers.authorization });
      script(ws, req, connections.length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
after(() => server.close());

const b64 = (s: string) => Buffer.from(s).toString('base64');
const frame = (ws: WebSocket, e: object) => ws.send(JSON.stringify(e));

function sinks() {
  const out = new PassThrough();
  const err = new PassThrough();
  let o = '';
  let e = '';
  out.on('data', (d) => {
    o += d;
  });
  err.on('data', (d) => {
    e += d;
  });
  return { out, err, stdout: () => o, stderr: () => e };
}

test('output in order on stdout and stderr, a gap as a note, the exit code returned', async () => {
  connections = [];
  script = (ws) => {
    frame(ws, { type: 'stdout', seq: 1, data: b64('one\n') });
    frame(ws, { type: 'stderr', seq: 2, data: b64('warn\n') });
    frame(ws, { type: 'gap', from: 3, to: 6 });
    frame(ws, { type: 'stdout', seq: 7, data: b64('seven\n') });
    frame(ws, { type: 'end', exit_code: 9 });
    ws.close(1000, 'end');
  };
  const s = sinks();
  const code = await attach({
    client: new Client(url, 'key_x'),
    env: 'env_1',
    pid: 'proc_1',
    tty: false,
    stdin: false,
    stdout: s.out,
    stderr: s.err,
  });
  assert.equal(code, 9);
  assert.equal(s.stdout(), 'one\nseven\n');
  assert.equal(
    s.stderr(),
    'warn\n[svc: 4 output frames lost (seq 3-6): the process wrote faster than it was read]\n',
  );
  assert.deepEqual(connections, [
    { url: '/v1/envs/env_1/processes/proc_1/stream?since=0', auth: 'Bearer key_x' },
  ]);
});

test('a stream dropped before the end is re-attached after the last seq; nothing is written twice', async () => {
  connections = [];
  script = (ws, _req, n) => {
    if (n === 1) {
      frame(ws, { type: 'stdout', seq: 1, data: b64('a') });
      frame(ws, { type: 'stdout', seq: 2, data: b64('b') });
      ws.terminate(); // the control plane went away mid-stream
      return;
    }
    // A replay may begin before what the client asked for: what it already has is skipped.
    frame(ws, { type: 'stdout', seq: 2, data: b64('b') });
    frame(ws, { type: 'stdout', seq: 3, data: b64('c') });
    frame(ws, { type: 'end', exit_code: null, signal: 'KILL' });
    ws.close(1000, 'end');
  };
  const s = sinks();
  const code = await attach({
    client: new Client(url, undefined),
    env: 'env_1',
    pid: 'proc_2',
    tty: true,
    stdin: false,
    stdout: s.out,
    stderr: s.err,
  });
  assert.equal(code, 137);
  assert.equal(s.stdout(), 'abc');
  assert.deepEqual(
    connections.map((c) => c.url),
    ['/v1/envs/env_1/processes/proc_2/stream?since=0', '/v1/envs/env_1/processes/proc_2/stream?since=2'],
  );
});

test('a refused upgrade is the server’s error; an end without a code says why', async () => {
  const s = sinks();
  await assert.rejects(
    attach({
      client: new Client(url, 'k'),
      env: 'env_1',
      pid: 'proc_refused',
      tty: false,
      stdin: false,
      stdout: s.out,
      stderr: s.err,
    }),
    (err: unknown) => err instanceof CliError && err.message === 'no such process: proc_refused',
  );
  script = (ws) => {
    frame(ws, { type: 'end', exit_code: null, reason: 'the host stream dropped' });
    ws.close(1000, 'end');
  };
  await assert.rejects(
    attach({
      client: new Client(url, 'k'),
      env: 'env_1',
      pid: 'proc_3',
      tty: false,
      stdin: false,
      stdout: s.out,
      stderr: s.err,
    }),
    /process proc_3 ended without an exit code: the host stream dropped/,
  );
});
