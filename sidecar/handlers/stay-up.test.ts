// The stay-up window a create leaves open (stay-up.ts) through the sidecar's handlers on real
// Docker: a window that failed fails the environment's next commands and the snapshot publishes
// nothing; a destroy still runs; a command that fails at once never gives a created and
// snapshotted environment, whether the create or the snapshot sees its exit; an allowed network
// is not probed at all.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import type { SidecarContext } from '../context.ts';
import { StackUnhealthy } from '../docker/errors.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { holdStayUp } from './stay-up.ts';
import { commandRunner, createPayload, testContext } from './testing.ts';

describe('stay-up windows through the handlers', { skip: tier('docker'), timeout: 600_000 }, () => {
  let dir: string;
  let ctx: SidecarContext;
  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-stayup-'));
    ctx = await testContext(join(dir, 'data'));
  });
  after(async () => {
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('a failed window fails the next exec and the snapshot (nothing published); destroy runs', async () => {
    const envId = testEnvId('stay');
    const run = commandRunner(ctx, envId, 'stay');
    try {
      const created = await run('env.create', {
        ...createPayload([svc('main', BUSYBOX_IMAGE, { volumes: ['work:/work'] })], ''),
        volumes: ['work'],
      });
      assert.equal(created.ok, true, created.error);
      const failed = Promise.reject(new StackUnhealthy("service 'main' exited with code 9"));
      failed.catch(() => {});
      holdStayUp(ctx, envId, failed);
      const exec = await run('env.exec', { service: 'main', cmd: ['true'] });
      assert.equal(exec.ok, false);
      assert.match(exec.error ?? '', /exited with code 9/);
      const snap = await run('env.snapshot', { name: 'ver_w' });
      assert.equal(snap.ok, false);
      assert.match(snap.error ?? '', /exited with code 9/);
      assert.equal(await ctx.storage.hasSnapshot(envId, 'ver_w'), false, 'no capture was published');
      assert.equal((await run('env.destroy', {})).ok, true);
      assert.equal(ctx.engineState.stayUps.has(envId), false);
    } finally {
      await run('env.destroy', {}).catch(() => {});
    }
  });

  test('a command that fails at once: the create or the snapshot says so, never both succeed', async () => {
    const envId = testEnvId('stayx');
    const run = commandRunner(ctx, envId, 'stayx');
    try {
      const created = await run(
        'env.create',
        createPayload([svc('main', BUSYBOX_IMAGE, { command: ['sh', '-c', 'echo early; exit 3'] })], ''),
      );
      if (!created.ok) {
        assert.match(created.error ?? '', /exited with code 3[\s\S]*early/);
        return;
      }
      const snap = await run('env.snapshot', { name: 'ver_x' });
      assert.equal(snap.ok, false, 'a snapshot of a stack whose command exited at once');
      assert.match(snap.error ?? '', /exited with code 3/);
      const exec = await run('env.exec', { service: 'main', cmd: ['true'] });
      assert.equal(exec.ok, false);
    } finally {
      await run('env.destroy', {}).catch(() => {});
    }
  });

  test('an allowed network is not probed: a probe that could not run is never run', async () => {
    const envId = testEnvId('stayp');
    const run = commandRunner(ctx, envId, 'stayp');
    const probe = ctx.probe;
    const dir = mkdtempSync(join(tmpdir(), 'svc-probe-'));
    const ran = join(dir, 'ran');
    ctx.probe = { command: ['sh', '-c', `touch ${ran}; echo probe-cannot-run >&2; exit 1`] };
    try {
      const created = await run('env.create', createPayload([svc('main', BUSYBOX_IMAGE)], ''));
      assert.equal(created.ok, true, created.error);
      assert.equal((created.payload as { egress: string }).egress, 'allowed');
      const snap = await run('env.snapshot', { name: 'ver_p' });
      assert.equal(snap.ok, true, snap.error);
      assert.equal(existsSync(ran), false, 'no probe ran');
    } finally {
      ctx.probe = probe;
      rmSync(dir, { recursive: true, force: true });
      await run('env.destroy', {}).catch(() => {});
    }
  });
});
