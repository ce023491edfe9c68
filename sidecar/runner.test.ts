// A command cut off by a crash is answered once after the restart, and an undo that fails is
// logged with its reason instead of being dropped (issue 9 §3).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
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
