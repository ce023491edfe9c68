// A command cut off by a crash is answered once after the restart, and an undo that fails is
// logged with its reason instead of being dropped.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type Frame, frame } from '../protocol/frames.ts';
import { Runner } from './runner.ts';

test('a failed crash-undo is logged and the cut-off command still gets its one stored result', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-runner-'));
  try {
    mkdirSync(join(dir, 'commands'));
    writeFileSync(
      join(dir, 'commands', 'cmd_1.running'),
      JSON.stringify({ kind: 'env.create', env_id: 'env_x' }),
    );
    const runner = new Runner(dir, {}, () => {});
    const lines: string[] = [];
    const cut = await runner.recover(
      async () => {
        throw new Error('docker: connection refused');
      },
      (l) => lines.push(l),
    );
    assert.deepEqual(cut, ['env.create env_x']);
    assert.deepEqual(lines, [
      'undoing env.create of env_x cut off by a restart failed: docker: connection refused',
    ]);
    const stored = JSON.parse(readFileSync(join(dir, 'commands', 'cmd_1.json'), 'utf8'));
    assert.equal(stored.ok, false);
    assert.equal(stored.error, 'the sidecar restarted while running env.create');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a failed result says why: a refused payload or id is malformed, anything else a host error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-runner-'));
  try {
    const sent: Frame[] = [];
    const runner = new Runner(
      dir,
      {
        'env.exec': async () => {
          throw new Error('container app is not running');
        },
      },
      (f) => sent.push(f),
    );
    const failure = () => {
      const r = sent.filter((f) => f.type === 'result').at(-1);
      return [r?.ok, r?.error_type, r?.error];
    };
    await runner.handle(
      frame('command', { command_id: 'cmd_1', kind: 'env.exec', env_id: 'env_1', payload: {} }),
    );
    assert.deepEqual(failure(), [false, 'malformed', 'payload.service must be a string']);
    const exec = { service: 'app', cmd: ['id'] };
    await runner.handle(
      frame('command', { command_id: 'cmd_2', kind: 'env.exec', env_id: 'env_1', payload: exec }),
    );
    assert.deepEqual(failure(), [false, 'host_error', 'container app is not running']);
    await runner.handle(
      frame('command', { command_id: 'bad id', kind: 'env.exec', env_id: 'env_1', payload: exec }),
    );
    assert.deepEqual(failure(), [false, 'malformed', 'invalid command id']);
    // A resent id is answered from its stored result, the type included.
    await runner.handle(
      frame('command', { command_id: 'cmd_1', kind: 'env.exec', env_id: 'env_1', payload: exec }),
    );
    assert.deepEqual(failure(), [false, 'malformed', 'payload.service must be a string']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
