// The behaviour every backend must show, run by each backend's test file against a real file
// system. A backend adds only how to find what it may have left behind (subvolumes, datasets).
import assert from 'node:assert/strict';
import { open, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { run } from './exec.ts';
import { type Scratch, scratchUsed } from './fixtures.ts';
import { BadName, detectStorageKind, openStorage, type StorageBackend, UnknownSnapshot } from './index.ts';
import { describeTree, modify, populate } from './trees.ts';
import type { CowKind, StorageKind, StorageOptions } from './types.ts';

export interface SuiteOptions {
  kind: StorageKind;
  skip: false | string;
  scratch: () => Promise<Scratch>;
  /**
   * Backend-specific traces of an env (datasets, subvolumes); empty once destroyed. Not `strict`:
   * history a living fork still shares may stay, marked to go with the last such fork (zfs).
   */
  leftovers?: (scratch: Scratch, envId: string, strict: boolean) => Promise<string[]>;
  /** What the store must report as `cow` (proves the options took effect). */
  cow?: CowKind;
  /** Extra openStorage options (e.g. `xfsLoop`). */
  options?: Partial<StorageOptions>;
}

const VOLS = ['data', 'db.v1'];

/** Inside a describe: a scratch file system and a store on it for the suite, undone afterwards. */
export function withStore(
  make: () => Promise<Scratch>,
  options: Partial<StorageOptions> = {},
): {
  scratch: () => Scratch;
  store: () => StorageBackend;
} {
  let scratch: Scratch | undefined;
  let store: StorageBackend | undefined;
  before(async () => {
    scratch = await make();
    store = await openStorage({ dataDir: scratch.dir, zfsPool: scratch.pool, ...options });
  });
  after(async () => {
    await scratch?.cleanup();
  });
  return { scratch: () => scratch!, store: () => store! };
}

export function storageSuite(label: string, opts: SuiteOptions): void {
  describe(label, { skip: opts.skip }, () => {
    const fixture = withStore(opts.scratch, opts.options);
    let scratch: Scratch;
    let store: StorageBackend;
    const dataDir = () => scratch.dir;
    before(() => {
      scratch = fixture.scratch();
      store = fixture.store();
    });

    /** Volumes of a fresh env, filled and described. */
    const filled = async (env: string, tag: string) => {
      const paths = await store.prepare(env, VOLS);
      for (const v of VOLS) await populate(paths[v], `${tag}-${v}`);
      return describeAll(store, env);
    };
    const traces = async (env: string, strict = true) => [
      ...(await entries(join(dataDir(), 'envs'))).filter((e) => e === env),
      ...(await entries(join(dataDir(), 'snaps'))).filter((e) => e === env),
      ...((await opts.leftovers?.(scratch, env, strict)) ?? []),
    ];

    it(`is picked as '${opts.kind}' for this data dir`, async () => {
      assert.equal(store.kind, opts.kind);
      if (opts.cow) assert.equal(store.cow, opts.cow);
      assert.equal(await detectStorageKind({ dataDir: dataDir(), zfsPool: scratch.pool }), opts.kind);
    });

    it('prepares empty volumes at the layout path, idempotently', async () => {
      const paths = await store.prepare('prep1', VOLS);
      for (const v of VOLS) {
        assert.equal(paths[v], join(dataDir(), 'envs', 'prep1', 'vol', v));
        assert.equal(store.volumePath('prep1', v), paths[v]);
        assert.deepEqual(await readdir(paths[v]), []);
      }
      await writeFile(join(paths.data, 'kept'), 'x');
      assert.deepEqual(await store.prepare('prep1', VOLS), paths);
      assert.deepEqual(await readdir(paths.data), ['kept']);
    });

    it('says when the content is captured: at most once, before the snapshot is published; later writes stay out', async () => {
      const paths = await store.prepare('cap1', ['data']);
      await writeFile(join(paths.data, 'f'), 'before');
      const calls: boolean[] = [];
      await store.snapshot('cap1', 'ver_c', ['data'], async () => {
        calls.push(await store.hasSnapshot('cap1', 'ver_c'));
        await writeFile(join(paths.data, 'f'), 'after the thaw'); // the stack runs again
      });
      assert.ok(calls.length <= 1 && calls.every((published) => !published), JSON.stringify(calls));
      await store.clone('cap1', 'ver_c', 'cap2', ['data']);
      const copy = await readFile(join(store.volumePath('cap2', 'data'), 'f'), 'utf8');
      assert.equal(copy, calls.length ? 'before' : copy);
    });

    it('rollback restores content, owners, modes, symlinks, hard links and holes exactly', async () => {
      const before = await filled('rb1', 'v1');
      const datasets = await store.snapshot('rb1', 'ver_1', VOLS);
      assert.equal(datasets.length, VOLS.length);
      assert.ok(await store.hasSnapshot('rb1', 'ver_1'));
      for (const v of VOLS) await modify(store.volumePath('rb1', v), 'later');
      assert.notDeepEqual(await describeAll(store, 'rb1'), before);
      await store.rollback('rb1', 'ver_1', VOLS);
      assert.deepEqual(await describeAll(store, 'rb1'), before);
      // The snapshot is unchanged by the rollback: a second one gives the same result.
      await modify(store.volumePath('rb1', 'data'), 'again');
      await store.rollback('rb1', 'ver_1', VOLS);
      assert.deepEqual(await describeAll(store, 'rb1'), before);
    });

    it('a clone is independent of its source in both directions', async () => {
      const original = await filled('src1', 'src');
      await store.snapshot('src1', 'ver_a', VOLS);
      const paths = await store.clone('src1', 'ver_a', 'fork1', VOLS);
      assert.deepEqual(paths, Object.fromEntries(VOLS.map((v) => [v, store.volumePath('fork1', v)])));
      assert.deepEqual(await describeAll(store, 'fork1'), original);
      for (const v of VOLS) await modify(store.volumePath('fork1', v), 'fork');
      const forked = await describeAll(store, 'fork1');
      assert.deepEqual(
        await describeAll(store, 'src1'),
        original,
        'a write in the clone shows in the source',
      );
      for (const v of VOLS) await modify(store.volumePath('src1', v), 'source');
      assert.deepEqual(await describeAll(store, 'fork1'), forked, 'a write in the source shows in the clone');
      await store.rollback('src1', 'ver_a', VOLS);
      assert.deepEqual(await describeAll(store, 'src1'), original, 'the snapshot changed');
      await assert.rejects(store.clone('src1', 'ver_a', 'fork1', VOLS), /already has volume/);
    });

    it('a rollback to an earlier version keeps every later one forkable', async () => {
      const v1 = await filled('hist', 'h1');
      await store.snapshot('hist', 'ver_1', VOLS);
      const states = [v1];
      for (const n of [2, 3]) {
        for (const v of VOLS) await modify(store.volumePath('hist', v), `h${n}`);
        states.push(await describeAll(store, 'hist'));
        await store.snapshot('hist', `ver_${n}`, VOLS);
      }
      await store.rollback('hist', 'ver_1', VOLS);
      assert.deepEqual(await describeAll(store, 'hist'), states[0]);
      for (const n of [2, 3]) assert.ok(await store.hasSnapshot('hist', `ver_${n}`), `ver_${n} lost`);
      await store.clone('hist', 'ver_2', 'hist-f2', VOLS);
      assert.deepEqual(await describeAll(store, 'hist-f2'), states[1]);
      // A new branch from ver_1, then back to the newest version of the old branch and forth.
      for (const v of VOLS) await modify(store.volumePath('hist', v), 'branch');
      const branch = await describeAll(store, 'hist');
      await store.snapshot('hist', 'ver_4', VOLS);
      await store.rollback('hist', 'ver_3', VOLS);
      assert.deepEqual(await describeAll(store, 'hist'), states[2]);
      await store.rollback('hist', 'ver_4', VOLS);
      assert.deepEqual(await describeAll(store, 'hist'), branch);
      await store.rollback('hist', 'ver_2', VOLS);
      assert.deepEqual(await describeAll(store, 'hist'), states[1]);
      for (const n of [1, 2, 3, 4]) assert.ok(await store.hasSnapshot('hist', `ver_${n}`));
      await store.destroy('hist');
      assert.deepEqual(await describeAll(store, 'hist-f2'), states[1]);
      await store.destroy('hist-f2');
      assert.deepEqual(await traces('hist'), []);
      assert.deepEqual(await traces('hist-f2'), []);
    });

    it('forks survive the destruction of their source', async () => {
      const base = await filled('base', 'b');
      await store.snapshot('base', 'ver_b1', VOLS);
      await store.clone('base', 'ver_b1', 'child1', VOLS);
      for (const v of VOLS) await modify(store.volumePath('base', v), 'b2');
      await store.snapshot('base', 'ver_b2', VOLS);
      await store.clone('base', 'ver_b2', 'child2', VOLS);
      const second = await describeAll(store, 'child2');
      await store.destroy('base');
      assert.deepEqual(await traces('base', false), []);
      assert.deepEqual(await describeAll(store, 'child1'), base);
      assert.deepEqual(await describeAll(store, 'child2'), second);
      // The survivors stay fully usable: their own versions, rollbacks and forks.
      await store.snapshot('child1', 'ver_c1', VOLS);
      await store.clone('child1', 'ver_c1', 'grandchild', VOLS);
      for (const v of VOLS) await modify(store.volumePath('child1', v), 'c');
      await store.rollback('child1', 'ver_c1', VOLS);
      assert.deepEqual(await describeAll(store, 'child1'), base);
      assert.equal(
        await store.hasSnapshot('child1', 'ver_b1'),
        false,
        'the source version leaks into the fork',
      );
      for (const env of ['child1', 'child2', 'grandchild']) await store.destroy(env);
      for (const env of ['base', 'child1', 'child2', 'grandchild']) assert.deepEqual(await traces(env), []);
    });

    it('a write past the disk limit fails with ENOSPC or EDQUOT; forks and rollbacks keep the limit', async () => {
      const limit = 32 * 1024 * 1024;
      const how = await store.setQuota('quota1', limit);
      assert.ok(!how.startsWith('none'), `nothing enforces the limit here: ${how}`);
      const paths = await store.prepare('quota1', VOLS);
      await writeFile(join(paths.data, 'small'), 'kept');
      const host = () => scratchUsed(scratch);
      const hostBefore = await host();
      // 4 MiB in one volume, then 256 MiB tried in the other: refused at the limit.
      assert.equal(await fill(join(paths['db.v1'], 'a'), 4), 'written');
      const outcome = await fill(join(paths.data, 'big'), 8 * (limit >> 20));
      assert.ok(
        outcome === 'ENOSPC' || outcome === 'EDQUOT',
        `writing 256 MiB under a 32 MiB limit: ${outcome}`,
      );
      // What the writer got allocated stays within the limit, and the host gave the scratch file
      // system far less than the 256 MiB tried.
      const allocated = (await stat(join(paths.data, 'big'))).blocks * 512;
      assert.ok(allocated <= limit + 1024 * 1024, `${allocated} bytes allocated under a 32 MiB limit`);
      const grown = (await host()) - hostBefore;
      assert.ok(grown < 4 * limit, `the host lost ${grown} bytes to a 32 MiB limit`);
      await rm(join(paths.data, 'big')); // space back for the rest of the test
      await store.snapshot('quota1', 'ver_q1', VOLS);
      assert.ok(!(await store.setQuota('quota1-f', limit)).startsWith('none'));
      await store.clone('quota1', 'ver_q1', 'quota1-f', VOLS);
      assert.equal(await readFile(join(store.volumePath('quota1-f', 'data'), 'small'), 'utf8'), 'kept');
      const forkOutcome = await fill(join(store.volumePath('quota1-f', 'data'), 'big'), 4 * (limit >> 20));
      assert.ok(
        forkOutcome === 'ENOSPC' || forkOutcome === 'EDQUOT',
        `the fork is unbounded: ${forkOutcome}`,
      );
      await store.rollback('quota1', 'ver_q1', VOLS);
      const again = await fill(join(store.volumePath('quota1', 'data'), 'big'), 4 * (limit >> 20));
      assert.ok(again === 'ENOSPC' || again === 'EDQUOT', `unbounded after a rollback: ${again}`);
      // A redeploy with a larger limit: the same env takes more at once.
      await rm(join(store.volumePath('quota1', 'data'), 'big'));
      const bigger = await store.setQuota('quota1', 3 * limit);
      assert.ok(!bigger.startsWith('none'), bigger);
      const more = await fill(join(store.volumePath('quota1', 'data'), 'grown'), 2 * (limit >> 20));
      // A loop file system grows online only with CAP_SYS_RESOURCE; otherwise it says it kept its size.
      if (/applies when the environment is recreated/.test(bigger)) assert.match(more, /ENOSPC|EDQUOT/);
      else assert.equal(more, 'written', bigger);
      await rm(join(store.volumePath('quota1', 'data'), 'grown'));
      // Volumes are mounted nosuid,nodev: a setuid file or a device node in them does nothing.
      // zfs: the dataset properties say so (ZFS on Linux mounts them nosuid,nodev; zfs-fuse, the
      // stand-in these tests run on, ignores both).
      if (opts.kind === 'zfs') {
        const props = await run('zfs', [
          'get',
          '-H',
          '-o',
          'value',
          'setuid,devices',
          `${scratch.pool}/envs/quota1/vol/data`,
        ]);
        assert.deepEqual(props.trim().split('\n'), ['off', 'off']);
      } else {
        const mopts = await mountOptions(store.volumePath('quota1', 'data'));
        assert.ok(mopts.includes('nosuid') && mopts.includes('nodev'), `volume mounted ${mopts.join(',')}`);
      }
      for (const env of ['quota1', 'quota1-f']) {
        await store.destroy(env);
        assert.deepEqual(await traces(env), []);
        assert.deepEqual(
          (await entries(join(dataDir(), 'disks'))).filter((e) => e === `${env}.img`),
          [],
        );
      }
    });

    it('destroy leaves nothing behind and is idempotent', async () => {
      await filled('gone', 'g');
      await store.snapshot('gone', 'ver_g1', VOLS);
      await store.rollback('gone', 'ver_g1', VOLS);
      await store.snapshot('gone', 'ver_g2', VOLS);
      await store.rollback('gone', 'ver_g1', VOLS);
      await writeFile(join(dataDir(), 'envs', 'gone', 'compose.yaml'), 'services: {}\n');
      assert.notDeepEqual(await traces('gone'), []);
      await store.destroy('gone');
      assert.deepEqual(await traces('gone'), []);
      assert.equal(await store.hasSnapshot('gone', 'ver_g1'), false);
      await store.destroy('gone');
      await store.destroy('never-existed');
    });

    it('refuses bad names and unknown snapshots with clear errors, changing nothing', async () => {
      await filled('strict', 's');
      await store.snapshot('strict', 'ver_s', VOLS);
      const before = await describeAll(store, 'strict');
      const listing = async () => [
        await entries(join(dataDir(), 'envs')),
        await entries(join(dataDir(), 'snaps')),
      ];
      const dirs = await listing();
      for (const bad of ['..', '../x', 'a/b', '.hidden', '', '-x', 'x'.repeat(65), 'sp ace']) {
        await assert.rejects(store.prepare(bad, ['data']), BadName);
        await assert.rejects(store.prepare('strict', [bad]), BadName);
        await assert.rejects(store.snapshot('strict', bad, VOLS), BadName);
        await assert.rejects(store.clone('strict', 'ver_s', bad, VOLS), BadName);
        await assert.rejects(store.destroy(bad), BadName);
        assert.throws(() => store.volumePath('strict', bad), BadName);
      }
      await assert.rejects(store.prepare('strict', ['data', 'data']), /listed twice/);
      const unknown = (err: unknown) =>
        err instanceof UnknownSnapshot && /env strict has no snapshot ver_nope/.test(err.message);
      await assert.rejects(store.rollback('strict', 'ver_nope', VOLS), unknown);
      await assert.rejects(store.clone('strict', 'ver_nope', 'other', VOLS), unknown);
      await assert.rejects(store.clone('strict', 'ver_s', 'other', ['data', 'absent']), /no volume absent/);
      await assert.rejects(store.snapshot('strict', 'ver_s', VOLS), /already has a snapshot ver_s/);
      await assert.rejects(store.snapshot('strict', 'ver_t', [...VOLS, 'absent']), /no volume absent/);
      assert.equal(await store.hasSnapshot('strict', 'ver_t'), false);
      await assert.rejects(store.clone('strict', 'ver_s', 'strict', VOLS), /into itself/);
      assert.deepEqual(await describeAll(store, 'strict'), before);
      assert.deepEqual(await listing(), dirs);
      assert.deepEqual(await traces('other'), []);
    });
  });
}

const entries = (dir: string) => readdir(dir).catch(() => [] as string[]);

/** Writes `mb` MiB of non-zero data; 'written', or the error code that stopped it. */
async function fill(path: string, mb: number): Promise<string> {
  const fh = await open(path, 'w');
  const chunk = Buffer.alloc(1024 * 1024, 7);
  try {
    for (let i = 0; i < mb; i++) await fh.write(chunk);
    await fh.sync();
    return 'written';
  } catch (err) {
    // libuv has no name for EDQUOT (122 on Linux): Node reports 'Unknown system error -122'.
    const e = err as NodeJS.ErrnoException;
    return e.errno === -122 ? 'EDQUOT' : (e.code ?? String(err));
  } finally {
    await fh.close().catch(() => {});
  }
}

/** Per-mount options of the mount that holds `path` (from /proc/self/mountinfo). */
async function mountOptions(path: string): Promise<string[]> {
  const real = await realpath(path);
  let best = { point: '', opts: [] as string[] };
  for (const line of (await readFile('/proc/self/mountinfo', 'utf8')).split('\n')) {
    const f = line.split(' ');
    const point = (f[4] ?? '').replace(/\\040/g, ' ');
    if (!point || !(real === point || real.startsWith(`${point}/`) || point === '/')) continue;
    if (point.length >= best.point.length) best = { point, opts: (f[5] ?? '').split(',') };
  }
  return best.opts;
}

async function describeAll(store: StorageBackend, env: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const v of VOLS) out[v] = await describeTree(store.volumePath(env, v));
  return out;
}
