// Live processes at their bounds, on real Docker: a `yes` flood (gaps, not memory, for a client
// that does not read; the ring replays at most 1 MiB), a WebSocket that stops reading (the control
// plane's socket buffer stays under its bound; the gap is told once it reads again), a million one-byte writes (coalesced,
// nothing lost), the 65th running process refused, and svcd SIGKILLed mid-stream (attached
// clients get an end that says why; the restarted svcd kills what it left and no longer knows the pid),
// that last row under runc and under gVisor (where the engine's pid of an exec is runsc's proxy,
// and the process must be killed in the sandbox).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MAX_OUTPUT_FRAME, MAX_PROCESSES_PER_ENV, PROCESS_RING_BYTES } from '../../protocol/processes.ts';
import { MAX_CLIENT_BUFFER } from '../../server/processes/sink.ts';
import { assertError } from '../support/api.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { b64, ended, followSse, followWs, hasText, type StreamEvent, start } from './processes-support.ts';
import { finished, IDLE_COMMAND, type Real, startReal } from './real.ts';

const stack = (runtime = 'runc') => `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
x-svc.runtime: ${runtime}
`;

const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

describe('live processes at their bounds on real Docker', { skip: tier('docker') }, async () => {
  const rows = tier('docker') ? [] : await runtimeRows();
  let r: Real;
  let env: string;
  let envRunc: string;
  const base = () => `/v1/envs/${env}/processes`;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    const p = await r.t.req('POST', '/v1/projects', { body: { name: 'bounds' } });
    env = p.body.environments[0].ID;
    const d = await r.t.req('POST', '/v1/projects/bounds/deploy', { body: { compose: stack() } });
    const { deployment } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
    envRunc = env;
  });
  after(async () => r?.close());

  test('a yes flood: a client that does not read gets gaps, memory stays bounded, replay is at most 1 MiB', async () => {
    const pid = await start(r.t, env, { service: 'app', cmd: ['yes', 'a line of output from yes'] });
    const slow = await followSse(r.t, env, pid, { read: false });
    const fast = await followSse(r.t, env, pid, { keepData: false });
    const t0 = Date.now();
    // 64 MiB at least went by (frames hold up to 64 KiB; gaps count as passed).
    await fast.until(() => fast.bytes >= 64 * 1024 * 1024 || fast.maxSeq >= 20_000);
    const seconds = (Date.now() - t0) / 1000;
    process.stderr.write(
      `yes flood: ${(fast.bytes / 2 ** 20).toFixed(0)} MiB to a reading client in ${seconds.toFixed(1)} s (${(fast.bytes / 2 ** 20 / seconds).toFixed(0)} MiB/s), ${fast.gaps} gaps; svcd RSS ${rssMiB(r.sidecar.pid as number).toFixed(0)} MiB\n`,
    );
    assert.ok(rssMiB(r.sidecar.pid as number) < 400, 'svcd memory stays bounded');
    // Replay holds at most the ring: the oldest output is a gap from seq 1.
    const replay = await followSse(r.t, env, pid, { since: 0, keepData: false });
    await replay.until((all) => all.length >= 2);
    const first = replay.events[0];
    assert.equal(first.type, 'gap');
    assert.equal((first as { from: number }).from, 1);
    replay.abort();
    const killed = await r.t.req('POST', `${base()}/${pid}/signal`, { body: { signal: 'KILL' } });
    assert.equal(killed.status, 204);
    await fast.until(ended);
    // The slow client reads now: it missed output, and says where, and still sees the end.
    slow.keepData = false;
    slow.read();
    await slow.until(ended);
    assert.ok(slow.gaps > 0, 'a slow client sees gap markers');
    assert.ok(slow.bytes < fast.bytes, 'the slow client was not sent everything');
    assert.deepEqual(slow.end(), { type: 'end', exit_code: 137, signal: 'KILL' });
    assert.ok(PROCESS_RING_BYTES === 1024 * 1024);
    assert.equal((await r.t.req('GET', '/health')).status, 200, 'the control plane still answers');
  });

  test('a WebSocket that stops reading: the socket buffer stays bounded, the gap is told once it reads, the end too', {
    timeout: 300_000,
  }, async () => {
    // Every socket the control plane writes to: the slow client's unsent bytes are measured there.
    const sockets = new Set<Socket>();
    const track = (s: Socket) => sockets.add(s);
    r.t.server.app.server.on('connection', track);
    let most = 0;
    const sample = () => {
      for (const s of sockets) most = Math.max(most, s.writableLength);
    };
    try {
      const pid = await start(r.t, env, {
        service: 'app',
        cmd: [
          'sh',
          '-c',
          // DONE is said again until stdin is fed: a reading follower may itself be given a gap
          // where the host stream was congested, and must still learn that the flood is over.
          'yes a line of output from yes | head -c 67108864; echo; (while :; do echo DONE; sleep 0.2; done) & read x; kill $!; echo BYE',
        ],
        stdin: true,
      });
      const slow = await followWs(r.t, env, pid);
      slow.ws.pause();
      const fast = await followSse(r.t, env, pid, { keepData: false });
      let done = false;
      const push = fast.push.bind(fast);
      fast.push = (e: StreamEvent) => {
        sample();
        if (e.type === 'stdout' && Buffer.from(e.data, 'base64').includes('DONE')) done = true;
        push(e);
      };
      await fast.until(() => done);
      sample();
      // One frame may go out past the bound (64 KiB as base64 in its envelope), no more.
      const bound = MAX_CLIENT_BUFFER + Math.ceil((MAX_OUTPUT_FRAME * 4) / 3) + 1024;
      process.stderr.write(
        `slow WebSocket: at most ${(most / 2 ** 20).toFixed(1)} MiB unsent on a control-plane socket (bound ${(bound / 2 ** 20).toFixed(1)} MiB) while ${(fast.bytes / 2 ** 20).toFixed(0)} MiB went to a reading client\n`,
      );
      assert.ok(most > 0, 'the slow client did fall behind');
      assert.ok(most <= bound, `unsent bytes ${most} stay under ${bound}`);
      // It reads again while the process waits on stdin: the gap comes without more output.
      slow.keepData = false;
      slow.ws.resume();
      await slow.until((all) => all.some((e) => e.type === 'gap'));
      assert.ok(!slow.end(), 'the process is still running');
      const one = await r.t.req('GET', `${base()}/${pid}`);
      assert.equal(one.body.status, 'running');
      const fed = await r.t.req('POST', `${base()}/${pid}/input`, { body: { data: b64('go\n') } });
      assert.equal(fed.status, 204);
      await slow.until(ended);
      assert.ok(slow.bytes < fast.bytes, 'the slow client was not sent everything');
      assert.deepEqual(slow.end(), { type: 'end', exit_code: 0 });
      await fast.until(ended);
      assert.equal((await r.t.req('GET', '/health')).status, 200, 'the control plane still answers');
    } finally {
      r.t.server.app.server.off('connection', track);
    }
  });

  test('a million one-byte writes arrive whole, coalesced into far fewer events', async () => {
    const pid = await start(r.t, env, {
      service: 'app',
      cmd: ['awk', 'BEGIN { for (i = 0; i < 1000000; i++) { printf "x"; fflush() } }'],
    });
    const s = await followSse(r.t, env, pid, { since: 0, keepData: false });
    await s.until(ended);
    assert.deepEqual(s.end(), { type: 'end', exit_code: 0 });
    assert.equal(s.gaps, 0, 'nothing dropped');
    assert.equal(s.bytes, 1_000_000);
    assert.ok(s.events.length < 100_000, `${s.events.length} events for a million writes`);
  });

  test(`the ${MAX_PROCESSES_PER_ENV + 1}th running process is refused with 409; ending one makes room`, async () => {
    const running = (await r.t.req('GET', base())).body.processes.filter(
      (p: { status: string }) => p.status === 'running',
    ).length;
    const pids: string[] = [];
    for (let i = running; i < MAX_PROCESSES_PER_ENV; i += 8) {
      const batch = Math.min(8, MAX_PROCESSES_PER_ENV - i);
      pids.push(
        ...(await Promise.all(
          Array.from({ length: batch }, () => start(r.t, env, { service: 'app', cmd: ['sleep', '1000'] })),
        )),
      );
    }
    const over = await r.t.req('POST', base(), { body: { service: 'app', cmd: ['sleep', '1000'] } });
    assertError(over, 409, 'process limit');
    const s = await followSse(r.t, env, pids[0]);
    await r.t.req('POST', `${base()}/${pids[0]}/signal`, { body: { signal: 'KILL' } });
    await s.until(ended);
    const again = await start(r.t, env, { service: 'app', cmd: ['sleep', '1000'] });
    for (const pid of [...pids.slice(1), again]) {
      const k = await r.t.req('POST', `${base()}/${pid}/signal`, { body: { signal: 'KILL' } });
      const now = (await r.t.req('GET', `${base()}/${pid}`)).body;
      assert.equal(
        k.status,
        204,
        `${JSON.stringify(k.body)} ${JSON.stringify(now)}\n${r.log().slice(-2000)}`,
      );
    }
    // A signal is answered once sent; a process counts as running until its end arrives. The next
    // test starts processes in this environment, so this one ends when all of its own have ended.
    const mine = new Set([...pids, again]);
    for (let i = 0; ; i++) {
      const list = (await r.t.req('GET', base())).body.processes as { pid: string; status: string }[];
      const left = list.filter((p) => mine.has(p.pid) && p.status === 'running');
      if (!left.length) break;
      if (i >= 600) assert.fail(`processes still running: ${JSON.stringify(left)}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  });

  for (const { runtime, skip } of rows)
    test(`svcd SIGKILLed mid-stream under ${runtime}: attached clients get an end that says why; after its restart the process is gone and its pid unknown`, {
      skip,
    }, async () => {
      let env = envRunc;
      if (runtime !== 'runc') {
        const project = `bounds-${runtime}`;
        const p = await r.t.req('POST', '/v1/projects', { body: { name: project } });
        env = p.body.environments[0].ID;
        const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
          body: { compose: stack(runtime) },
        });
        const { deployment } = await finished(r.t, d.body.deployment.ID);
        assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
      }
      const base = () => `/v1/envs/${env}/processes`;
      const pid = await start(r.t, env, {
        service: 'app',
        cmd: ['sh', '-c', 'while :; do echo tick; sleep 0.2; done'],
      });
      const sse = await followSse(r.t, env, pid);
      const ws = await followWs(r.t, env, pid);
      await sse.until(hasText('tick'));
      await ws.until(hasText('tick'));
      // svcd records the process (its host pid, once Docker reports it) beside its output: the kill
      // below is only a test of what a restart does with that record once it exists.
      const record = `${r.dataDir}/processes/${pid}.json`;
      for (let i = 0; i < 600 && !existsSync(record); i++) await new Promise((res) => setTimeout(res, 100));
      assert.ok(existsSync(record), 'svcd never recorded the process');
      // Under gVisor the host pid is runsc's exec proxy: the record names the task in the sandbox too.
      const noted = JSON.parse(readFileSync(record, 'utf8'));
      assert.equal(Number.isInteger(noted.sandbox?.task), runtime === 'gvisor', JSON.stringify(noted));
      await r.killSidecar();
      for (const c of [sse, ws]) {
        await c.until(ended);
        const end = c.end();
        assert.equal(end?.exit_code, null);
        assert.match(end?.reason ?? '', /host's stream dropped/);
      }
      // The ticker outlived svcd (an exec is not its child) until the next svcd killed it.
      const container = execFileSync(
        'docker',
        ['ps', '-q', '--filter', `label=com.docker.compose.project=${env.toLowerCase()}`],
        { encoding: 'utf8' },
      ).trim();
      const ps = () => execFileSync('docker', ['exec', container, 'ps', '-o', 'args'], { encoding: 'utf8' });
      assert.match(ps(), /echo tick/);
      await r.startSidecar();
      assert.doesNotMatch(
        ps(),
        /echo tick/,
        `${readdirSync(`${r.dataDir}/processes`)} ${r.log().slice(-3000)}`,
      );
      assert.match(r.log(), /killed [1-9][0-9]* process\(es\) an earlier svcd left running/);
      assertError(await r.t.req('GET', `${base()}/${pid}`), 404, 'no such process');
      const again = await followWs(r.t, env, pid);
      await again.until(ended);
      assert.match(again.end()?.reason ?? '', /no such process/);
      assert.equal((await r.t.req('GET', '/health')).status, 200);
    });
});
