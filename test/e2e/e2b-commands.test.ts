// Commands through the real `e2b` SDK (`sandbox.commands`, `sandbox.pty`: envd's process.Process)
// against svc-server + a real svcd on Docker. The SDK runs `/bin/bash -l -c cmd`: the image is the
// Debian test image (bash), not busybox.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CommandExitError, Sandbox } from 'e2b';
import { ensureTestImages, PGREDIS_IMAGE } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { finished, IDLE_COMMAND, type Real, startReal } from './real.ts';

/** Resolves on the first call whose text matches (fails, saying what came, after 120 s: a hang guard). */
function waitFor(re: RegExp): { on: (text: string) => void; seen: Promise<string> } {
  let got: (t: string) => void = () => {};
  let all = '';
  const seen = new Promise<string>((r, reject) => {
    got = r;
    setTimeout(() => reject(new Error(`never saw ${re} in ${JSON.stringify(all)}`)), 120_000).unref();
  });
  return {
    on: (text: string) => {
      all += text;
      if (re.test(all)) got(all);
    },
    seen,
  };
}

describe('E2B SDK commands against svc on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let url: string;
  let s: Sandbox;
  const opts = () => ({ apiUrl: url, sandboxUrl: url, apiKey: r.t.key, requestTimeoutMs: 300_000 });
  before(async () => {
    await ensureTestImages({ postgres: true });
    r = await startReal({ env: { SVC_E2B_ADDR: '127.0.0.1:0' } });
    url = r.t.server.e2b?.url ?? '';
    s = await Sandbox.create(PGREDIS_IMAGE, opts());
  });
  after(async () => {
    await s?.kill().catch(() => {});
    await r?.close();
  });

  test('run: stdout, stderr, exit code, cwd and envs; a failing command is CommandExitError', async () => {
    const ok = await s.commands.run('echo hi; echo err >&2');
    assert.deepEqual([ok.stdout, ok.stderr, ok.exitCode], ['hi\n', 'err\n', 0]);
    const where = await s.commands.run('pwd; echo $FOO', { cwd: '/tmp', envs: { FOO: 'bar' } });
    assert.equal(where.stdout, '/tmp\nbar\n');
    await assert.rejects(
      s.commands.run('exit 3'),
      (e: CommandExitError) => e instanceof CommandExitError && e.exitCode === 3,
    );
  });

  test('output streams before the command ends; background commands are listed, connected to and killed', async () => {
    const first = waitFor(/first/);
    const h = await s.commands.run('echo first; sleep 600', { background: true, onStdout: first.on });
    await first.seen;
    assert.equal(h.exitCode, undefined, 'still running when its first line arrived');
    const listed = await s.commands.list();
    assert.ok(
      listed.some((p) => p.pid === h.pid && p.args.join(' ').includes('sleep 600')),
      JSON.stringify(listed),
    );
    const again = await s.commands.connect(h.pid);
    assert.equal(await s.commands.kill(h.pid), true);
    await assert.rejects(h.wait(), CommandExitError);
    await assert.rejects(again.wait(), CommandExitError);
    assert.ok(!(await s.commands.list()).some((p) => p.pid === h.pid));
  });

  test('stdin: sent, then closed (EOF ends cat)', async () => {
    const echoed = waitFor(/hello/);
    const h = await s.commands.run('cat', { background: true, stdin: true, onStdout: echoed.on });
    await s.commands.sendStdin(h.pid, 'hello\n');
    await echoed.seen;
    await s.commands.closeStdin(h.pid);
    const done = await h.wait();
    assert.equal(done.exitCode, 0);
    assert.equal(done.stdout, 'hello\n');
  });

  test("a command's timeout ends the process, as envd does", async () => {
    await assert.rejects(s.commands.run('sleep 300 && echo late', { timeoutMs: 1500 }));
    for (let i = 0; i < 300; i++) {
      const running = await s.commands.list();
      if (!running.some((p) => p.args.join(' ').includes('sleep 300'))) return;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.fail('the timed-out process still runs');
  });

  test('pty: input, resize, output', async () => {
    const prompt = waitFor(/# /);
    const out = waitFor(/30 100/);
    const h = await s.pty.create({
      cols: 80,
      rows: 24,
      onData: (d) => {
        prompt.on(Buffer.from(d).toString());
        out.on(Buffer.from(d).toString());
      },
    });
    await prompt.seen; // the shell has set its terminal up
    await s.pty.resize(h.pid, { cols: 100, rows: 30 });
    await s.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo pty-says-hi\n'));
    const text = await out.seen;
    assert.match(text, /30 100/);
    assert.equal(await s.pty.kill(h.pid), true);
  });

  test('pty: closeStdin is refused, as envd does; the terminal goes on, and Ctrl-D ends its shell', async () => {
    const prompt = waitFor(/# /);
    const again = waitFor(/still-2\r\n[\s\S]*# /);
    const h = await s.pty.create({
      cols: 80,
      rows: 24,
      onData: (d) => {
        prompt.on(Buffer.from(d).toString());
        again.on(Buffer.from(d).toString());
      },
    });
    await prompt.seen;
    await assert.rejects(s.commands.closeStdin(h.pid), /Ctrl-D/);
    await s.pty.sendInput(h.pid, new TextEncoder().encode('echo still-$((1 + 1))\n'));
    await again.seen; // its output, then the next prompt: the refused close changed nothing
    await s.pty.sendInput(h.pid, new Uint8Array([4]));
    assert.equal((await h.wait()).exitCode, 0);
  });

  test("a killed sandbox's open streams end at once", async () => {
    const other = await Sandbox.create(PGREDIS_IMAGE, opts());
    const started = waitFor(/up/);
    const h = await other.commands.run('echo up; sleep 600', { background: true, onStdout: started.on });
    await started.seen;
    await other.kill();
    await assert.rejects(h.wait());
  });

  test('a ver_ template of a two-service stack: the agent reaches its peer by name', async () => {
    await r.t.req('POST', '/v1/projects', { body: { name: 'e2bpeers' } });
    const compose = `
services:
  agent:
    image: ${PGREDIS_IMAGE}
    user: "1000:1000"
    command: ${IDLE_COMMAND}
  peer:
    image: ${PGREDIS_IMAGE}
    command: ${IDLE_COMMAND}
x-svc.agent.service: agent
`;
    const started = await r.t.req('POST', '/v1/projects/e2bpeers/deploy', { body: { compose } });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const d = await finished(r.t, started.body.deployment.ID);
    assert.equal(d.deployment.Status, 'succeeded', `${d.deployment.Error}\n${r.log()}`);
    const stack = await Sandbox.create(d.deployment.VersionID, opts());
    try {
      const who = await stack.commands.run('hostname; getent hosts peer');
      assert.match(who.stdout, /peer/);
    } finally {
      await stack.kill();
    }
  });
});
