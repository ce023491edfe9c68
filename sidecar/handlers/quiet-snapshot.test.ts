// Quiet volumes (quiet.ts): a just-created sandbox whose volume is empty and untouched is captured
// without checkpoints or a freeze; a volume a command wrote to is captured frozen; a change made
// while a quiet capture runs discards that copy and captures again, frozen. Every snapshot, cloned
// as a fork would be, holds exactly the files of its instant.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import type { SidecarContext } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { assertQuiet, QUIET_AGE_MS, quietVolumes, VolumesChanged } from './quiet.ts';
import { commandRunner, createPayload, testContext } from './testing.ts';

interface Snap {
  frozen_for: number;
  consistent: boolean;
  timings?: Record<string, number>;
}

describe('quiet volumes: the stamps', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-quiet-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const later = () => Date.now() + 10 * QUIET_AGE_MS;

  test('an empty directory that last changed long enough ago is quiet until it changes', async () => {
    const vol = mkdtempSync(join(dir, 'v'));
    const stamps = await quietVolumes([vol], later);
    assert.ok(stamps);
    await assertQuiet(stamps);
    writeFileSync(join(vol, 'f'), 'x');
    rmSync(join(vol, 'f'));
    await assert.rejects(assertQuiet(stamps), VolumesChanged, 'a file made and removed is a change');
  });

  test('a root that changed within QUIET_AGE_MS, a volume with an entry, or none at all is not quiet', async () => {
    const fresh = mkdtempSync(join(dir, 'v'));
    assert.equal(await quietVolumes([fresh], () => 0), null, 'changed after "now"');
    const full = mkdtempSync(join(dir, 'v'));
    writeFileSync(join(full, '.hidden'), '');
    assert.equal(await quietVolumes([full], later), null);
    assert.equal(await quietVolumes([join(dir, 'missing')], later), null);
    assert.equal(await quietVolumes([], later), null);
  });

  test('a chmod or a utimes of the root is a change', async () => {
    for (const change of [
      (p: string) => import('node:fs').then((fs) => fs.chmodSync(p, 0o700)),
      async (p: string) => utimesSync(p, 1, 1),
    ]) {
      const vol = mkdtempSync(join(dir, 'v'));
      const stamps = await quietVolumes([vol], later);
      assert.ok(stamps);
      await change(vol);
      await assert.rejects(assertQuiet(stamps), VolumesChanged);
    }
  });
});

describe('env.snapshot of quiet volumes', { skip: tier('docker'), timeout: 600_000 }, () => {
  const envId = testEnvId('quiet');
  let dir: string;
  let ctx: SidecarContext;
  let run: ReturnType<typeof commandRunner>;
  let n = 0;
  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-quiet-'));
    ctx = await testContext(join(dir, 'data'));
    run = commandRunner(ctx, envId, 'quiet');
    const r = await run('env.create', {
      ...createPayload([svc('main', BUSYBOX_IMAGE, { volumes: ['work:/work'] })], ''),
      volumes: ['work'],
    });
    assert.equal(r.ok, true, r.error);
  });
  after(async () => {
    await run('env.destroy', {}).catch(() => {});
    for (let i = 0; i < n; i++) await ctx.storage.destroy(`${envId}f${i}`).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  /** The files a fork of `snapshot` starts with: name → content. */
  async function forked(snapshot: string): Promise<Record<string, string>> {
    const paths = await ctx.storage.clone(envId, snapshot, `${envId}f${n++}`, ['work']);
    const out: Record<string, string> = {};
    for (const f of readdirSync(paths.work)) out[f] = readFileSync(join(paths.work, f), 'utf8');
    return out;
  }
  async function snapshot(name: string): Promise<Snap> {
    const r = await run('env.snapshot', { name });
    assert.equal(r.ok, true, r.error);
    return r.payload as Snap;
  }

  test('a fresh sandbox’s empty volume: no checkpoint, no freeze, an empty fork', async () => {
    const s = await snapshot('ver_fresh');
    assert.equal(s.frozen_for, 0);
    assert.equal(s.consistent, true);
    assert.equal(s.timings?.checkpoints, undefined, 'no database was looked for: nothing was frozen');
    assert.deepEqual(await forked('ver_fresh'), {});
  });

  test('a change while the quiet copy is made discards it: captured again, frozen, with the change', async () => {
    const live = ctx.storage.volumePath(envId, 'work');
    let held = 0;
    ctx.hold = async (point) => {
      // A process writes between the stamps and the copy: the first take must not be published.
      if (point === 'env.snapshot:frozen' && held++ === 0) writeFileSync(join(live, 'late'), 'written');
    };
    try {
      const s = await snapshot('ver_raced');
      assert.equal(held, 2, 'taken twice');
      assert.ok(s.timings?.checkpoints !== undefined, 'the second take checkpointed and froze');
    } finally {
      ctx.hold = undefined;
    }
    assert.deepEqual(await forked('ver_raced'), { late: 'written' });
    assert.deepEqual(await forked('ver_fresh'), {}, 'the earlier version is untouched');
  });

  test('a volume a command wrote to is captured frozen, with what the command wrote', async () => {
    const w = await run('env.exec', { service: 'main', cmd: ['sh', '-c', 'echo hi > /work/a'] });
    assert.equal((w.payload as { exit_code: number }).exit_code, 0);
    const s = await snapshot('ver_written');
    assert.ok(s.timings?.checkpoints !== undefined, 'the stack was checkpointed and frozen');
    assert.ok(s.frozen_for >= 0);
    assert.deepEqual(await forked('ver_written'), { a: 'hi\n', late: 'written' });
  });
});

describe('env.snapshot of a create’s early copy', { skip: tier('docker'), timeout: 600_000 }, () => {
  let dir: string;
  let ctx: SidecarContext;
  const made: string[] = [];
  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-early-'));
    ctx = await testContext(join(dir, 'data'));
  });
  after(async () => {
    for (const env of made) await ctx.storage.destroy(env).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh sandbox with an empty volume, created as version `version`, and its runner. */
  async function fresh(tag: string, version: string) {
    const envId = testEnvId(tag);
    made.push(envId);
    const run = commandRunner(ctx, envId, tag);
    const r = await run('env.create', {
      ...createPayload([svc('main', BUSYBOX_IMAGE, { volumes: ['work:/work'] })], ''),
      version,
      volumes: ['work'],
    });
    assert.equal(r.ok, true, r.error);
    return { envId, run };
  }
  async function forkFiles(envId: string, snapshot: string): Promise<string[]> {
    const to = `${envId}f`;
    made.push(to);
    return readdirSync((await ctx.storage.clone(envId, snapshot, to, ['work'])).work);
  }

  test('the version’s snapshot is the copy made while the container started: no second copy', async () => {
    const { envId, run } = await fresh('early', 'ver_e1');
    try {
      const r = await run('env.snapshot', { name: 'ver_e1' });
      assert.equal(r.ok, true, r.error);
      const s = r.payload as Snap;
      assert.ok(s.timings?.early_copy !== undefined, JSON.stringify(s.timings));
      assert.equal(s.timings?.checkpoints, undefined);
      assert.deepEqual(await forkFiles(envId, 'ver_e1'), []);
    } finally {
      await run('env.destroy', {}).catch(() => {});
    }
  });

  test('a write after the copy discards it: the snapshot is taken frozen and holds the write', async () => {
    const { envId, run } = await fresh('earlyw', 'ver_e2');
    try {
      const w = await run('env.exec', { service: 'main', cmd: ['sh', '-c', 'echo hi > /work/a'] });
      assert.equal((w.payload as { exit_code: number }).exit_code, 0);
      const r = await run('env.snapshot', { name: 'ver_e2' });
      assert.equal(r.ok, true, r.error);
      const s = r.payload as Snap;
      assert.equal(s.timings?.early_copy, undefined, 'the early copy was not published');
      assert.ok(s.timings?.checkpoints !== undefined, 'taken again, frozen');
      assert.deepEqual(await forkFiles(envId, 'ver_e2'), ['a']);
    } finally {
      await run('env.destroy', {}).catch(() => {});
    }
  });
});
