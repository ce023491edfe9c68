// Live processes on real Docker through a real control plane and svcd: output while the process
// runs, processes that outlive their request (listed, fed stdin, signalled), exit codes, a PTY
// resized and seen by `stty size` (its command's first instruction included), a PTY's input that
// ends with Ctrl-D rather than a close, re-attach with `since` after a dropped client, the WebSocket's
// own messages, and another team's key refused on every route including the upgrade. Every row
// runs under runc and under gVisor (the runtime matrix), the stack's runtime checked first.
import assert from 'node:assert/strict';
import { release } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { assertError, otherTeam } from '../support/api.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { b64, ended, followSse, followWs, hasText, start, textOf } from './processes-support.ts';
import { exec, finished, IDLE_COMMAND, type Real, startReal } from './real.ts';

const stack = (runtime: string) => `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
  bare:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
x-svc.runtime: ${runtime}
`;

describe('live processes on real Docker', { skip: tier('docker') }, async () => {
  const rows = tier('docker') ? [] : await runtimeRows();
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_DEV_LOGIN: '1' } });
  });
  after(async () => r?.close());

  for (const { runtime, skip } of rows)
    describe(`under ${runtime}`, { skip }, () => {
      let env: string;
      before(async () => {
        const project = `procs-${runtime}`;
        const p = await r.t.req('POST', '/v1/projects', { body: { name: project } });
        env = p.body.environments[0].ID;
        const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
          body: { compose: stack(runtime) },
        });
        assert.equal(d.status, 202, JSON.stringify(d.body));
        const { deployment } = await finished(r.t, d.body.deployment.ID);
        assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
        const kernel = (await exec(r.t, env, 'app', ['uname', '-r'])).stdout.trim();
        assert.equal(kernel === release(), runtime === 'runc', `the stack runs under ${runtime}`);
      });

      test('output arrives while the process runs; stdin feeds it; the end carries the exit code', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'echo first; echo oops >&2; read line; echo "got $line"; exit 7'],
          stdin: true,
        });
        const s = await followSse(r.t, env, pid);
        // The process is blocked on `read`: this output can only have come before its end.
        await s.until(hasText('first'));
        assert.ok(!s.end(), 'the process cannot have ended before its input');
        const one = await r.t.req('GET', `/v1/envs/${env}/processes/${pid}`);
        assert.equal(one.status, 200, JSON.stringify(one.body));
        assert.equal(one.body.status, 'running');
        assert.deepEqual(one.body.cmd[0], 'sh');
        const stderr = await s.until((all) => all.some((e) => e.type === 'stderr'));
        assert.equal(textOf(stderr.filter((e) => e.type === 'stderr')), 'oops\n');
        const fed = await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/input`, {
          body: { data: b64('hello\n') },
        });
        assert.equal(fed.status, 204, JSON.stringify(fed.body));
        const all = await s.until(ended);
        assert.match(textOf(all), /got hello/);
        assert.deepEqual(s.end(), { type: 'end', exit_code: 7 });
        // Sequence numbers rise by one, stdout and stderr alike.
        const seqs = all.filter((e) => 'seq' in e).map((e) => (e as { seq: number }).seq);
        assert.deepEqual(
          seqs,
          seqs.map((_, i) => i + 1),
        );
        const done = await r.t.req('GET', `/v1/envs/${env}/processes/${pid}`);
        assert.equal(done.body.status, 'exited');
        assert.equal(done.body.exit_code, 7);
      });

      test('a background process outlives its request, is listed, takes stdin and is killed by a signal', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'cat; sleep 1000'],
          stdin: true,
        });
        const list = await r.t.req('GET', `/v1/envs/${env}/processes`);
        assert.equal(list.status, 200, JSON.stringify(list.body));
        const mine = list.body.processes.find((p: { pid: string }) => p.pid === pid);
        assert.equal(mine.status, 'running');
        assert.equal(mine.service, 'app');
        assert.equal(typeof mine.started_at, 'string');
        for (const body of [{ data: b64('line one\n') }, { data: b64('line two\n'), close: true }]) {
          const fed = await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/input`, { body });
          assert.equal(fed.status, 204, JSON.stringify(fed.body));
        }
        // stdin is closed now: more input is a clear 409, and the process is unharmed.
        const late = await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/input`, {
          body: { data: b64('x') },
        });
        assertError(late, 409, 'closed');
        // What it was fed comes back (cat echoes it), and it runs on after its stdin closed.
        const s = await followSse(r.t, env, pid, { since: 0 });
        await s.until(hasText('line one\nline two\n'));
        const killed = await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/signal`, {
          body: { signal: 'KILL' },
        });
        assert.equal(killed.status, 204, JSON.stringify(killed.body));
        await s.until(ended);
        assert.deepEqual(s.end(), { type: 'end', exit_code: 137, signal: 'KILL' });
        // The process itself is gone, not only what the engine reports (under gVisor the engine's pid
        // is runsc's proxy, which a KILL ends while the process would run on in the sandbox).
        assert.doesNotMatch((await exec(r.t, env, 'app', ['ps', '-o', 'args'])).stdout, /sleep 1000/);
        const after = await r.t.req('GET', `/v1/envs/${env}/processes/${pid}`);
        assert.equal(after.body.status, 'exited');
        // Signalling it again is a 409; an unknown pid is a 404 on every route.
        assertError(
          await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/signal`, { body: { signal: 'TERM' } }),
          409,
        );
        for (const [method, path, body] of [
          ['GET', '', undefined],
          ['POST', '/signal', { signal: 'TERM' }],
          ['POST', '/input', { close: true }],
          ['GET', '/stream', undefined],
        ] as const) {
          const res = await r.t.req(
            method,
            `/v1/envs/${env}/processes/proc_nosuch${path}`,
            body ? { body } : {},
          );
          assertError(res, 404, 'no such process');
        }
      });

      test('a terminal: stty size sees the size it was started with and each resize', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh'],
          stdin: true,
          tty: { rows: 24, cols: 80 },
        });
        const w = await followWs(r.t, env, pid);
        w.send({ type: 'input', data: b64('stty size\n') });
        await w.until(hasText('24 80'));
        // A resize and the keystrokes after it go in the process's one lane: the next line sees it.
        w.send({ type: 'resize', rows: 40, cols: 100 });
        w.send({ type: 'input', data: b64('stty size\n') });
        await w.until(hasText('40 100'));
        w.send({ type: 'input', data: b64('exit 5\n') });
        await w.until(ended);
        assert.deepEqual(w.end(), { type: 'end', exit_code: 5 });
        assert.equal(await w.closed, 1000);
      });

      test("a terminal's input does not close (409, as envd): Ctrl-D ends cat, and output goes on", async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'cat; echo after'],
          stdin: true,
          tty: { rows: 24, cols: 80 },
        });
        const w = await followWs(r.t, env, pid);
        w.send({ type: 'input', data: b64('hello\n') });
        // Echoed by the terminal, then written back by cat: cat reads its terminal.
        await w.until(hasText('hello\r\nhello\r\n'));
        w.send({ type: 'close_stdin' });
        const [refused] = (await w.until((all) => all.some((e) => e.type === 'error'))).filter(
          (e) => e.type === 'error',
        );
        assert.match(JSON.stringify(refused), /Ctrl-D/);
        const input = `/v1/envs/${env}/processes/${pid}/input`;
        assertError(await r.t.req('POST', input, { body: { close: true } }), 409, 'Ctrl-D');
        // A refused close changes nothing: its data is not written either.
        const both = { data: b64('lost\n'), close: true };
        assertError(await r.t.req('POST', input, { body: both }), 409, 'Ctrl-D');
        w.send({ type: 'input', data: b64('still\n') });
        await w.until(hasText('still\r\nstill\r\n'));
        // The end of input on a terminal: Ctrl-D at the start of a line.
        w.send({ type: 'input', data: Buffer.from([4]).toString('base64') });
        await w.until(ended);
        assert.deepEqual(w.end(), { type: 'end', exit_code: 0 });
        assert.match(w.text(), /still\r\nstill\r\n[\s\S]*after\r\n$/);
        assert.doesNotMatch(w.text(), /lost/);
      });

      // A lost end event would leave these waiting: the timeout makes that a failure, not a hang.
      const GUARD = { timeout: 300_000 };

      test("a terminal's size is set before its command's first instruction", GUARD, async () => {
        for (let i = 0; i < 10; i++) {
          const pid = await start(r.t, env, {
            service: 'app',
            cmd: ['stty', 'size'],
            tty: { rows: 33, cols: 101 },
          });
          const s = await followSse(r.t, env, pid, { since: 0 });
          assert.equal(textOf(await s.until(hasText('\n'))), '33 101\r\n', `run ${i + 1}`);
          await s.until(ended);
          assert.deepEqual(s.end(), { type: 'end', exit_code: 0 });
        }
      });

      test(
        "a terminal's command is itself: ps shows it, Docker's refusal, a KILL ends it (gVisor too)",
        GUARD,
        async () => {
          const pid = await start(r.t, env, {
            service: 'app',
            cmd: ['cat', '-'],
            stdin: true,
            tty: { rows: 5, cols: 9 },
          });
          const s = await followSse(r.t, env, pid, { since: 0 });
          const w = (to: string, data: string) =>
            r.t.req('POST', `/v1/envs/${env}/processes/${to}/input`, { body: { data } });
          await w(pid, b64('ping\n'));
          await s.until(hasText('ping\r\nping\r\n'));
          const ps = () => exec(r.t, env, 'app', ['ps', '-o', 'args']).then((o) => o.stdout);
          assert.match(await ps(), /^cat -$/m);
          await w(pid, Buffer.from([4]).toString('base64'));
          await s.until(ended);
          assert.deepEqual(s.end(), { type: 'end', exit_code: 0 });
          // A KILL ends it, under gVisor too, where it goes to the task in the sandbox (the shell's
          // task, which the command became). One that ignores SIGHUP: the end of the terminal alone,
          // as when only runsc's proxy is killed, would leave it running.
          const script = '#!/bin/sh\ntrap "" HUP\necho ready\nwhile :; do sleep 1; done\n';
          await exec(r.t, env, 'app', [
            'sh',
            '-c',
            `printf '${script}' > /bin/svc-hupless; chmod +x /bin/svc-hupless`,
          ]);
          const loop = await start(r.t, env, {
            service: 'app',
            cmd: ['svc-hupless'],
            tty: { rows: 5, cols: 9 },
          });
          const l = await followSse(r.t, env, loop, { since: 0 });
          await l.until(hasText('ready'));
          const killed = await r.t.req('POST', `/v1/envs/${env}/processes/${loop}/signal`, {
            body: { signal: 'KILL' },
          });
          assert.equal(killed.status, 204, JSON.stringify(killed.body));
          await l.until(ended);
          assert.deepEqual(l.end(), { type: 'end', exit_code: 137, signal: 'KILL' });
          assert.doesNotMatch(await ps(), /svc-hupless/);
          // A command that is not there: Docker's own words and exit code, as without a terminal.
          const missing = await start(r.t, env, {
            service: 'app',
            cmd: ['no-such-cmd'],
            tty: { rows: 5, cols: 9 },
          });
          const m = await followSse(r.t, env, missing, { since: 0 });
          await m.until(ended);
          assert.equal(
            m.text(),
            'OCI runtime exec failed: exec failed: unable to start container process: exec: "no-such-cmd": ' +
              'executable file not found in $PATH: unknown\r\n',
          );
          assert.deepEqual(m.end(), { type: 'end', exit_code: 126 });
        },
      );

      test(
        "without /bin/sh a terminal's command starts directly, and one that ends at once is ended",
        GUARD,
        async () => {
          await exec(r.t, env, 'bare', ['rm', '/bin/sh']);
          const pid = await start(r.t, env, {
            service: 'bare',
            cmd: ['echo', 'no shell here'],
            tty: { rows: 33, cols: 101 },
          });
          const s = await followSse(r.t, env, pid, { since: 0 });
          await s.until(ended);
          assert.equal(s.text(), 'no shell here\r\n');
          assert.deepEqual(s.end(), { type: 'end', exit_code: 0 });
        },
      );

      test('input, resize, input sent back to back over the WebSocket reach the terminal in that order', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'while read l; do echo "=$l $(stty size)"; done'],
          stdin: true,
          tty: { rows: 24, cols: 80 },
        });
        const w = await followWs(r.t, env, pid);
        // Nothing is waited for between them: the WebSocket's order is the only order there is.
        const sizes: [number, number][] = [];
        w.send({ type: 'input', data: b64('start\n') });
        for (let i = 1; i <= 12; i++) {
          sizes.push([20 + i, 60 + 3 * i]);
          w.send({ type: 'resize', rows: 20 + i, cols: 60 + 3 * i });
          w.send({ type: 'input', data: b64(`line${i}\n`) });
        }
        const all = await w.until((events) => /=line12 \d+ \d+/.test(textOf(events)));
        const text = textOf(all);
        for (let i = 1; i <= 12; i++) {
          const m = new RegExp(`=line${i} (\\d+) (\\d+)`).exec(text);
          assert.ok(m, `line${i} answered: ${text}`);
          // The shell may read a line after later resizes too, never before the one sent ahead of it.
          const seen = sizes.findIndex(([rows, cols]) => rows === Number(m[1]) && cols === Number(m[2]));
          assert.ok(seen >= i - 1, `line${i} sees ${m[1]} ${m[2]}, from before the resize sent ahead of it`);
        }
        assert.ok(
          !all.some((e) => e.type === 'error'),
          JSON.stringify(all.filter((e) => e.type === 'error')),
        );
        w.send({ type: 'signal', signal: 'KILL' });
        await w.until(ended);
      });

      test('a WebSocket message that is not one of the four closes that socket with 1008, nothing else', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'read x; echo "read $x"'],
          stdin: true,
        });
        const bad = await followWs(r.t, env, pid);
        bad.send({ type: 'nope' });
        assert.equal(await bad.closed, 1008);
        const w = await followWs(r.t, env, pid);
        // A message the host refuses is an error event; the stream goes on.
        w.send({ type: 'resize', rows: 10, cols: 10 });
        w.send({ type: 'input', data: 'not base64!' });
        await w.until((all) => all.filter((e) => e.type === 'error').length === 2);
        assert.match(JSON.stringify(w.events), /has no terminal.*data must be base64/);
        w.send({ type: 'input', data: b64('ok\n') });
        await w.until(ended);
        assert.match(w.text(), /read ok/);
      });

      test('re-attach after a dropped client: since replays what the buffer holds, nothing lost', async () => {
        const pid = await start(r.t, env, {
          service: 'app',
          cmd: ['sh', '-c', 'i=1; while [ $i -le 300 ]; do echo line$i; i=$((i+1)); done; read x; echo last'],
          stdin: true,
        });
        const first = await followSse(r.t, env, pid);
        const seen = await first.until(hasText('line300\n'));
        first.abort();
        const lastSeq = Math.max(...seen.filter((e) => 'seq' in e).map((e) => (e as { seq: number }).seq));
        const all = await followSse(r.t, env, pid, { since: 0 });
        await all.until(hasText('line300\n'));
        const expected = Array.from({ length: 300 }, (_, i) => `line${i + 1}\n`).join('');
        assert.equal(all.text(), expected);
        assert.ok(!all.events.some((e) => e.type === 'gap'));
        // From where the dropped client stopped: only what came after it.
        const rest = await followSse(r.t, env, pid, { since: lastSeq });
        await r.t.req('POST', `/v1/envs/${env}/processes/${pid}/input`, {
          body: { data: b64('go\n'), close: true },
        });
        await rest.until(ended);
        assert.equal(rest.text(), 'last\n');
        await all.until(ended);
        assert.equal(all.text(), `${expected}last\n`);
      });

      test("another team's key gets 404 on every process route, the WebSocket upgrade included", async () => {
        const pid = await start(r.t, env, { service: 'app', cmd: ['sleep', '1000'] });
        const b = await otherTeam(r.t, 'intruder@example.com');
        const base = `/v1/envs/${env}/processes`;
        for (const [method, path, body] of [
          ['POST', base, { service: 'app', cmd: ['true'] }],
          ['GET', base, undefined],
          ['GET', `${base}/${pid}`, undefined],
          ['POST', `${base}/${pid}/input`, { close: true }],
          ['POST', `${base}/${pid}/signal`, { signal: 'KILL' }],
          ['GET', `${base}/${pid}/stream`, undefined],
        ] as const)
          assertError(await r.t.req(method, path, { token: b.key, ...(body ? { body } : {}) }), 404);
        await assert.rejects(followWs(r.t, env, pid, { token: b.key }), /upgrade refused: 404/);
        await assert.rejects(followWs(r.t, env, pid, { token: 'dak_nope' }), /upgrade refused: 401/);
        const mine = await r.t.req('GET', `${base}/${pid}`);
        assert.equal(mine.body.status, 'running', 'the intruder changed nothing');
        await r.t.req('POST', `${base}/${pid}/signal`, { body: { signal: 'KILL' } });
      });
    });
});
