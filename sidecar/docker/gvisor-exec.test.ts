// How a timed-out gVisor exec is told: runsc's exec proxy recognised from its host command line
// (and nothing else taken for one), and the names gVisor may give the exec's task.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { execProxy, plausibleName } from './gvisor-exec.ts';

const ID = 'ab'.repeat(32);

test('a process running as runsc exec is read as a proxy: root, container, parent; others are not', async () => {
  // The shell stands in for runsc: only its command line is read ('; :' keeps it from exec'ing sleep).
  const proxy = spawn(
    'sh',
    ['-c', 'sleep 30; :', '--root', '/run/svc-root', 'exec', '--process', '/tmp/p', ID],
    {
      argv0: 'runsc-exec',
    },
  );
  try {
    await once(proxy, 'spawn');
    const p = await execProxy(proxy.pid as number);
    assert.ok(p, 'recognised');
    assert.equal(p.root, '/run/svc-root');
    assert.equal(p.containerId, ID);
    assert.equal(p.ppid, process.pid);
    assert.ok(p.started > 0);
    assert.equal(await execProxy(process.pid), null, 'node is no proxy');
    assert.equal(await execProxy(2 ** 22 + 1), null, 'a pid that does not exist');
  } finally {
    proxy.kill('SIGKILL');
  }
  const other = spawn('sh', ['-c', 'sleep 30; :', '--root', '/r', 'exec', 'not-a-container-id'], {
    argv0: 'runsc-exec',
  });
  try {
    await once(other, 'spawn');
    assert.equal(await execProxy(other.pid as number), null, 'the last argument must be a container id');
  } finally {
    other.kill('SIGKILL');
  }
});

test("a task's name is its program's or a word of its command, cut to 15 characters as gVisor does", () => {
  assert.ok(plausibleName(['sleep', '1000'], 'sleep'));
  assert.ok(plausibleName(['/bin/sh', '-c', 'while :; do sleep 0.1; done'], 'sh'));
  assert.ok(plausibleName(['sh', '-c', 'exec sleep 9'], 'sleep'));
  assert.ok(plausibleName(['/usr/local/bin/a-very-long-program-name'], 'a-very-long-pro'));
  assert.ok(!plausibleName(['sleep', '1000'], 'sh'));
  assert.ok(!plausibleName(['sleep', '1000'], ''));
});
