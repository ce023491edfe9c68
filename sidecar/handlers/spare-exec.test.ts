// Spare execs through the sidecar's handlers on real Docker: env.pause leaves
// the exec default service (the agent) with a ready spare, frozen with the stack; the first
// env.exec after env.unpause runs on it, the second (plain) starts the next and from then on each
// used one is followed by the next; a timeout on a spare is env.exec's
// 124 with the partial output; env.snapshot leaves the first service one for its health phase;
// verify.collect never takes the agent's spare; env.destroy drops it.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { projectName } from '../docker/render.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, createPayload, testContext } from './testing.ts';

describe('spare execs through env.pause, env.exec and verify', {
  skip: tier('docker'),
  timeout: 600_000,
}, () => {
  const envId = testEnvId('spare');
  let dir: string;
  let ctx: SidecarContext;
  let run: ReturnType<typeof commandRunner>;
  let mainId = '';
  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-spare-'));
    ctx = await testContext(join(dir, 'data'));
    run = commandRunner(ctx, envId, 'spare');
    const r = await run(
      'env.create',
      createPayload(
        [svc('helper', BUSYBOX_IMAGE), svc('main', BUSYBOX_IMAGE, { user: '1000:1000' })],
        'main',
      ),
    );
    assert.equal(r.ok, true, r.error);
    const all = await engineOf(ctx, envId).containers();
    mainId = all.find((c) => c.service === 'main')?.id ?? '';
    assert.ok(mainId);
  });
  after(async () => {
    await run('env.destroy', {}).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('env.pause leaves the agent a frozen spare; the first exec after env.unpause runs on it', async () => {
    assert.equal(ctx.engineState.spares.get(mainId), undefined, 'a create makes no spare');
    const paused = await run('env.pause', {});
    assert.equal(paused.ok, true, paused.error);
    assert.deepEqual([...(paused.payload as { services: string[] }).services].sort(), ['helper', 'main']);
    const spare = ctx.engineState.spares.get(mainId);
    assert.equal(spare?.state, 'ready');
    assert.equal(ctx.engineState.spares.isFrozen(mainId), true);
    const refused = await run('env.exec', { service: 'main', cmd: ['true'] });
    assert.equal(refused.ok, false);
    assert.match(refused.error ?? '', /paused/);
    assert.equal(spare?.state, 'ready', 'a frozen spare is not taken');

    assert.equal((await run('env.unpause', {})).ok, true);
    const r = await run('env.exec', { service: 'main', cmd: ['sh', '-c', 'id -u; echo err >&2; exit 3'] });
    assert.deepEqual(r.payload, { exit_code: 3, stdout: '1000\n', stderr: 'err\n' });
    assert.equal(spare?.went, true, 'the exec ran on the spare');
    assert.equal(ctx.engineState.spares.get(mainId), undefined, "the container's first command leaves none");
    const second = await run('env.exec', { service: 'main', cmd: ['echo', 'plain'] });
    assert.deepEqual(second.payload, { exit_code: 0, stdout: 'plain\n', stderr: '' });
    const next = ctx.engineState.spares.get(mainId);
    assert.ok(next && next !== spare, 'a second command starts the next');
    assert.equal(await next.ready, true);
    const again = await run('env.exec', { service: 'main', cmd: ['echo', 'loop'] });
    assert.deepEqual(again.payload, { exit_code: 0, stdout: 'loop\n', stderr: '' });
    assert.equal(next.went, true, 'a sequential loop keeps hitting spares');
    assert.ok(ctx.engineState.spares.get(mainId), 'and each is followed by the next');
  });

  test('a command on a spare that times out is env.exec 124 with its partial output', async () => {
    assert.equal(await ctx.engineState.spares.prepare(ctx.docker, projectName(envId), 'main', mainId), true);
    const spare = ctx.engineState.spares.get(mainId);
    const r = await run('env.exec', {
      service: 'main',
      cmd: ['sh', '-c', 'echo partial; echo e >&2; sleep 600'],
      timeout_sec: 1,
    });
    assert.equal(spare?.went, true);
    const p = r.payload as { exit_code: number; stdout: string; stderr: string };
    assert.equal(p.exit_code, 124);
    assert.equal(p.stdout, 'partial\n');
    assert.equal(p.stderr, 'e\n\nsvc: command timed out after 1 s and was killed');
  });

  test('verify.collect freezes the agent without ever taking its spare', async () => {
    assert.equal(await ctx.engineState.spares.prepare(ctx.docker, projectName(envId), 'main', mainId), true);
    const spare = ctx.engineState.spares.get(mainId);
    const r = await run('verify.collect', { id: 'dep_sparecheck', agent_service: 'main', collect: ['/tmp'] });
    assert.equal(r.ok, true, r.error);
    assert.equal(spare?.went, false);
    assert.equal(ctx.engineState.spares.get(mainId), spare);
    assert.equal((await run('env.unpause', {})).ok, true);
  });

  test('env.snapshot leaves the first service a spare for the health phase’s command after the thaw', async () => {
    const all = await engineOf(ctx, envId).containers();
    const helperId = all.find((c) => c.service === 'helper')?.id ?? '';
    ctx.engineState.spares.get(helperId)?.drop();
    const snap = await run('env.snapshot', { name: 'spare-snap' });
    assert.equal(snap.ok, true, snap.error);
    const spare = ctx.engineState.spares.get(helperId);
    assert.equal(spare?.state, 'ready', 'started while the databases checkpoint, thawed with the stack');
    assert.equal(ctx.engineState.spares.isFrozen(helperId), false);
    const r = await run('env.exec', { service: 'helper', cmd: ['true'] });
    assert.deepEqual(r.payload, { exit_code: 0, stdout: '', stderr: '' });
    assert.equal(spare?.went, true, 'the snapshot deployment’s health command ran on it');
  });

  test('env.destroy drops the spares of the environment', async () => {
    assert.equal(await ctx.engineState.spares.prepare(ctx.docker, projectName(envId), 'main', mainId), true);
    const spare = ctx.engineState.spares.get(mainId);
    assert.equal((await run('env.destroy', {})).ok, true);
    await spare?.dropped;
    assert.equal(ctx.engineState.spares.get(mainId), undefined);
    assert.equal(ctx.engineState.spares.size, 0);
  });
});
