import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { KEEPER } from '../../protocol/keeper.ts';
import { lookAtKeeper, provenKeeper, runsKeeper } from './keeper.ts';
import { svc } from './testing.ts';

test('only a check-less service whose command is exactly the keeper, with no entrypoint, runs it', () => {
  assert.equal(runsKeeper(svc('k', 'busybox', { command: [...KEEPER] })), true);
  assert.equal(runsKeeper(svc('k', 'busybox', { command: [...KEEPER, 'extra'] })), false);
  assert.equal(runsKeeper(svc('k', 'busybox', { command: ['sh', '-c', 'sleep 3600'] })), false);
  assert.equal(runsKeeper(svc('k', 'busybox', { command: null })), false);
  assert.equal(runsKeeper(svc('k', 'busybox', { command: [...KEEPER], entrypoint: ['tini', '--'] })), false);
  const health = { test: ['CMD', 'true'], interval: '1s', retries: 1 };
  assert.equal(runsKeeper(svc('k', 'busybox', { command: [...KEEPER], health })), false);
});

test('a running keeper loop is steady; another process, or one that ended, never is', async () => {
  const keeper = spawn(KEEPER[0], KEEPER.slice(1), { stdio: 'ignore' });
  const other = spawn('sh', ['-c', 'sleep 3600 & wait'], { stdio: 'ignore' });
  try {
    // Up to ~10 s of looks: a loaded machine may take its time to start the loop.
    assert.equal(await provenKeeper(keeper.pid as number, 2_000), true);
    assert.equal(await lookAtKeeper(keeper.pid as number), 'steady');
    assert.equal(await lookAtKeeper(other.pid as number), 'not yet', 'it might still exec the keeper');
    assert.equal(await provenKeeper(other.pid as number), false);
    assert.equal(await lookAtKeeper(0), 'no');
    assert.equal(await lookAtKeeper(-1), 'no');
  } finally {
    keeper.kill('SIGTERM');
    other.kill('SIGKILL');
  }
  await once(keeper, 'exit');
  assert.equal(await lookAtKeeper(keeper.pid as number), 'no', 'gone');
});
