// One disk limit across all of an environment's volumes, on a real btrfs or zfs-fuse:
// two volumes each written to 60% of the limit, and the second write fails, while another env
// and the host are untouched. The limit holds for volumes added later (after an svcd restart),
// for forks (each their own) and after rollbacks; data only a version keeps counts; destroy
// releases the qgroup or dataset.
import assert from 'node:assert/strict';
import { type FileHandle, open, rm, stat, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { withStore } from './conformance.ts';
import { type Scratch, scratchUsed } from './fixtures.ts';
import { openStorage } from './index.ts';

export interface LimitSuiteOptions {
  skip: false | string;
  scratch: () => Promise<Scratch>;
  /** What backs the env's limit (its qgroup, its dataset); empty once it is destroyed. */
  limitTraces: (scratch: Scratch, envId: string) => Promise<string[]>;
  /** What `setQuota` must say (defaults to "across volumes"). */
  how?: RegExp;
  /** Checks after an operation that may leave the backend's accounting stale (btrfs forks). */
  accountingSettled?: (scratch: Scratch) => Promise<void>;
}

const MIB = 1024 * 1024;
const LIMIT_MB = 64;
const SHARE_MB = Math.round(LIMIT_MB * 0.6);
const refused = (outcome: string) => outcome === 'ENOSPC' || outcome === 'EDQUOT';

/**
 * Removes a test file from a volume at its limit. On ZFS an unlink needs a little space of its own,
 * and at the quota it can fail with EDQUOT (-122) until the space of the refused write is freed a
 * moment later: the file is emptied first, and the removal tried again, a bounded number of times.
 */
async function remove(path: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      return await rm(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).errno;
      if (i >= 20 || (code !== -122 && code !== -28)) throw err;
      await truncate(path, 0).catch(() => {});
      await sleep(100);
    }
  }
}

/** Writes `mb` MiB of non-zero data and syncs; 'written', or the error code that stopped it. */
export async function fill(path: string, mb: number): Promise<string> {
  const chunk = Buffer.alloc(MIB, 7);
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, 'w'); // creating the file can already be refused
    for (let i = 0; i < mb; i++) await fh.write(chunk);
    await fh.sync();
    return 'written';
  } catch (err) {
    // libuv has no name for EDQUOT (122 on Linux): Node reports 'Unknown system error -122'.
    const e = err as NodeJS.ErrnoException;
    return e.errno === -122 ? 'EDQUOT' : (e.code ?? String(err));
  } finally {
    await fh?.close().catch(() => {});
  }
}

const allocated = async (path: string) => (await stat(path).catch(() => ({ blocks: 0 }))).blocks * 512;

export function diskLimitSuite(label: string, opts: LimitSuiteOptions): void {
  describe(label, { skip: opts.skip }, () => {
    const { scratch, store } = withStore(opts.scratch);
    const file = (env: string, volume: string, name: string) => join(store().volumePath(env, volume), name);
    const used = () => scratchUsed(scratch());

    it('bounds the volumes of one env together; another env and the host are untouched', async () => {
      const how = await store().setQuota('lim', LIMIT_MB * MIB);
      assert.match(how, opts.how ?? /across volumes/);
      assert.ok(!(await store().setQuota('other', LIMIT_MB * MIB)).startsWith('none'));
      await store().prepare('lim', ['a', 'b']);
      await store().prepare('other', ['a']);
      const before = await used();
      assert.equal(await fill(file('lim', 'a', 'f'), SHARE_MB), 'written');
      const second = await fill(file('lim', 'b', 'f'), SHARE_MB);
      assert.ok(refused(second), `60% of the limit in each of two volumes: ${second}`);
      const total = (await allocated(file('lim', 'a', 'f'))) + (await allocated(file('lim', 'b', 'f')));
      assert.ok(total <= (LIMIT_MB + 4) * MIB, `${total} bytes allocated under a ${LIMIT_MB} MiB limit`);
      // The other env has its own limit, untouched by this one's.
      assert.equal(await fill(file('other', 'a', 'f'), SHARE_MB), 'written');
      const grown = (await used()) - before;
      assert.ok(grown < 3 * LIMIT_MB * MIB, `the host lost ${grown} bytes`);
      await remove(file('lim', 'b', 'f'));
    });

    it('covers volumes added after a restart, forks (each their own) and rollbacks', async () => {
      await opts.accountingSettled?.(scratch());
      await store().snapshot('lim', 'ver_1', ['a', 'b']);
      // svcd restarted (a new store on the same data dir), then a redeploy adds a volume.
      const again = await openStorage({ dataDir: scratch().dir, zfsPool: scratch().pool });
      await again.prepare('lim', ['a', 'b', 'c']);
      const third = await fill(file('lim', 'c', 'f'), SHARE_MB);
      assert.ok(refused(third), `a volume added later is outside the limit: ${third}`);
      await remove(file('lim', 'c', 'f'));

      // A fork is bounded by its own limit, and what it writes does not count against its source.
      assert.match(await again.setQuota('lim-f', LIMIT_MB * MIB), /across volumes/);
      await again.clone('lim', 'ver_1', 'lim-f', ['a', 'b']);
      await opts.accountingSettled?.(scratch());
      const forkOutcome = await fill(file('lim-f', 'b', 'f'), 2 * LIMIT_MB);
      assert.ok(refused(forkOutcome), `the fork is unbounded: ${forkOutcome}`);
      assert.ok((await allocated(file('lim-f', 'b', 'f'))) <= (LIMIT_MB + 4) * MIB);
      assert.equal(await fill(file('lim', 'b', 'g'), 16), 'written', 'the fork used up its source');
      await remove(file('lim', 'b', 'g'));

      // After a rollback the live volumes are new datasets: still inside the env's limit.
      await again.rollback('lim', 'ver_1', ['a', 'b']);
      await opts.accountingSettled?.(scratch());
      const afterRollback = await fill(file('lim', 'b', 'f'), SHARE_MB);
      assert.ok(refused(afterRollback), `unbounded after a rollback: ${afterRollback}`);
      await remove(file('lim', 'b', 'f'));

      // Data only a version keeps still counts: deleting it from the live volume frees nothing.
      await remove(file('lim', 'a', 'f'));
      const kept = await fill(file('lim', 'b', 'f'), SHARE_MB);
      assert.ok(refused(kept), `a version's data is not counted: ${kept}`);
    });

    it('destroy releases what backs the limit', async () => {
      for (const env of ['lim', 'lim-f', 'other']) {
        assert.notDeepEqual(await opts.limitTraces(scratch(), env), [], `${env} has no limit to release`);
        await store().destroy(env);
        assert.deepEqual(await opts.limitTraces(scratch(), env), []);
        if (env !== 'lim') continue;
        // The fork outlives its source and stays bounded (zfs moves shared history into it).
        const outcome = await fill(file('lim-f', 'a', 'g'), 2 * LIMIT_MB);
        assert.ok(refused(outcome), `the fork is unbounded once its source is gone: ${outcome}`);
      }
    });
  });
}
