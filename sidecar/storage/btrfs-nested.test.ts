// A subvolume made inside a volume (the ioctl needs no privilege, so any container can)
// on a real btrfs with full qgroup accounting: before svcd sees it, it is outside the env's limit;
// once the sweep ran (called, or its timer, waited for by its effect), writes past the env's limit
// fail. Snapshots and forks hold an empty directory in its place; destroy removes everything.
// With simple quotas the kernel puts it into its parent's groups by itself, unless the creator
// names a group (the ioctl's inherit argument, no privilege needed): in both modes one charged
// to another env's group is moved back into its own.
import assert from 'node:assert/strict';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BtrfsBackend } from './btrfs.ts';
import { groupId, qgroupChildren } from './btrfs-quota.ts';
import { enableSimpleQuotas, simpleQuotaUnavailable } from './btrfs-simple.ts';
import { withStore } from './conformance.ts';
import { run } from './exec.ts';
import { fsTier, loopFs, type Scratch } from './fixtures.ts';
import { fill } from './limit-suite.ts';

const skip = fsTier('btrfs');
const MIB = 1024 * 1024;
const LIMIT_MB = 64;
const refused = (outcome: string) => outcome === 'ENOSPC' || outcome === 'EDQUOT';

const rootId = async (path: string) =>
  `0/${(await run('btrfs', ['inspect-internal', 'rootid', path])).trim()}`;
const members = async (dir: string, env: string) => (await qgroupChildren(dir)).get(groupId(env)) ?? [];

async function consistent(scratch: Scratch): Promise<boolean> {
  const uuid = (await run('findmnt', ['-n', '-o', 'UUID', '-T', scratch.dir])).trim();
  return (await readFile(`/sys/fs/btrfs/${uuid}/qgroups/inconsistent`, 'utf8')).trim() === '0';
}

/** Subvolumes of the file system whose path names `envId`. */
async function subvolumesOf(mount: string, envId: string): Promise<string[]> {
  const out = await run('btrfs', ['subvolume', 'list', mount]);
  return out
    .split('\n')
    .map((l) => l.replace(/^.* path /, ''))
    .filter((p) => p.split('/').includes(envId));
}

describe('btrfs: subvolumes made inside a volume count against the env limit', { skip }, () => {
  const { scratch, store } = withStore(() => loopFs('btrfs', 1024));
  const btrfs = () => store() as BtrfsBackend;

  it('a nested subvolume joins the group when svcd sweeps; writes past the limit then fail', async () => {
    assert.match(await store().setQuota('nest', LIMIT_MB * MIB), /^btrfs qgroup /);
    const { data } = await store().prepare('nest', ['data']);
    const inner = join(data, 'inner');
    btrfs().sweeper.stop(); // this case drives the sweep itself
    await run('btrfs', ['subvolume', 'create', inner]);
    await run('btrfs', ['subvolume', 'create', join(inner, 'deeper')]);
    // The hole: outside every group, twice the env's limit is written.
    assert.equal(await fill(join(inner, 'deeper', 'f'), 2 * LIMIT_MB), 'written');
    assert.equal((await members(scratch().dir, 'nest')).includes(await rootId(inner)), false);
    await rm(join(inner, 'deeper', 'f'));
    await run('btrfs', ['filesystem', 'sync', scratch().dir]);

    // Another tool's group on the same file system is not svcd's to fill.
    await run('btrfs', ['qgroup', 'create', '1/77', scratch().dir]);
    const stranger = join(scratch().dir, 'stranger');
    await run('btrfs', ['subvolume', 'create', '-i', '1/77', stranger]);
    await run('btrfs', ['subvolume', 'create', join(stranger, 'inside')]);

    const made = await btrfs().sweepNested();
    assert.equal(made.length, 2, made.join(', '));
    const foreign = (await qgroupChildren(scratch().dir)).get('1/77') ?? [];
    assert.deepEqual(foreign, [await rootId(stranger)]);
    const group = await members(scratch().dir, 'nest');
    for (const path of [inner, join(inner, 'deeper')]) assert.ok(group.includes(await rootId(path)), path);
    assert.ok(await consistent(scratch()), 'accounting left inconsistent: no limit enforced');
    const outcome = await fill(join(inner, 'deeper', 'g'), 2 * LIMIT_MB);
    assert.ok(refused(outcome), `a nested subvolume is still outside the limit: ${outcome}`);
    const st = await stat(join(inner, 'deeper', 'g'));
    assert.ok(
      st.blocks * 512 <= (LIMIT_MB + 4) * MIB,
      `${st.blocks * 512} bytes under a ${LIMIT_MB} MiB limit`,
    );
    assert.deepEqual(await btrfs().sweepNested(), [], 'a second sweep has nothing to do');
  });

  it('snapshots and forks hold an empty directory where a nested subvolume was', async () => {
    const inner = join(store().volumePath('nest', 'data'), 'inner');
    const [snap] = await store().snapshot('nest', 'ver_1', ['data']);
    assert.deepEqual(await readdir(join(snap, 'inner')), []);
    assert.match(await store().setQuota('nest-f', LIMIT_MB * MIB), /^btrfs qgroup /);
    const fork = await store().clone('nest', 'ver_1', 'nest-f', ['data']);
    assert.deepEqual(await readdir(join(fork.data, 'inner')), []);
    assert.ok((await readdir(join(inner, 'deeper'))).includes('g'), 'the live nested data stays');
    // A rollback replaces the volume, nested subvolumes too (the env's group is at its limit).
    await store().rollback('nest', 'ver_1', ['data']);
    assert.deepEqual(await readdir(inner), []);
    assert.deepEqual(
      (await subvolumesOf(scratch().dir, 'nest')).filter((p) => p.includes('inner')),
      [],
      'the nested subvolumes outlive the rollback',
    );
  });

  it('the periodic sweep adopts a subvolume made later (waited for by its effect)', async () => {
    btrfs().sweeper.start(200);
    const late = join(store().volumePath('nest-f', 'data'), 'late');
    // Charged to another env's group (the ioctl's inherit argument needs no privilege either).
    await run('btrfs', ['subvolume', 'create', '-i', groupId('nest'), late]);
    const id = await rootId(late);
    assert.ok((await members(scratch().dir, 'nest')).includes(id));
    // Bounded wait for the sweep's effect: in its env's group only, then consistent accounting.
    let adopted = false;
    for (let i = 0; i < 600 && !adopted; i++) {
      adopted =
        (await members(scratch().dir, 'nest-f')).includes(id) &&
        !(await members(scratch().dir, 'nest')).includes(id) &&
        (await consistent(scratch()));
      if (!adopted) await sleep(100);
    }
    assert.ok(adopted, "the sweep never moved the subvolume into the fork env's group only");
    const outcome = await fill(join(late, 'f'), 2 * LIMIT_MB);
    assert.ok(refused(outcome), `the late subvolume is outside the limit: ${outcome}`);
  });

  it('destroy removes the nested subvolumes and the groups', async () => {
    btrfs().sweeper.stop();
    for (const env of ['nest', 'nest-f']) {
      await store().destroy(env);
      assert.deepEqual(await subvolumesOf(scratch().dir, env), []);
      assert.equal((await qgroupChildren(scratch().dir)).has(groupId(env)), false);
    }
    assert.deepEqual(await readdir(join(scratch().dir, 'envs')), []);
  });
});

function simpleSkip(): false | string {
  if (skip) return skip;
  const why = simpleQuotaUnavailable();
  return why ? `*** BTRFS SIMPLE QUOTAS SKIPPED: ${why} ***` : false;
}

describe('btrfs simple quotas: the kernel puts a nested subvolume into its parent groups, unless told otherwise', {
  skip: simpleSkip(),
}, () => {
  const { scratch, store } = withStore(async () => {
    const s = await loopFs('btrfs', 1024);
    await enableSimpleQuotas(s.dir).catch(async (err) => {
      await s.cleanup();
      throw err;
    });
    return s;
  });

  it('without any sweep, a write past the limit into a nested subvolume fails', async () => {
    (store() as BtrfsBackend).sweeper.stop();
    assert.match(await store().setQuota('sq', LIMIT_MB * MIB), /^btrfs simple-quota qgroup /);
    const { data } = await store().prepare('sq', ['data']);
    const inner = join(data, 'inner');
    await run('btrfs', ['subvolume', 'create', inner]);
    assert.ok((await members(scratch().dir, 'sq')).includes(await rootId(inner)));
    assert.deepEqual(await (store() as BtrfsBackend).sweepNested(), []);
    // An inherit argument naming another env's group replaces the kernel's own inheritance (the
    // subvolume escapes its env and charges the other): the sweep moves it back.
    await store().setQuota('sq2', LIMIT_MB * MIB);
    const charged = join(data, 'charged');
    await run('btrfs', ['subvolume', 'create', '-i', groupId('sq2'), charged]);
    const id = await rootId(charged);
    assert.ok((await members(scratch().dir, 'sq2')).includes(id));
    assert.equal((await members(scratch().dir, 'sq')).includes(id), false);
    assert.deepEqual(await (store() as BtrfsBackend).sweepNested(), [
      `assign ${id} ${groupId('sq')}`,
      `remove ${id} ${groupId('sq2')}`,
    ]);
    assert.ok((await members(scratch().dir, 'sq')).includes(id));
    assert.equal((await members(scratch().dir, 'sq2')).includes(id), false);
    const outcome = await fill(join(inner, 'f'), 2 * LIMIT_MB);
    assert.ok(refused(outcome), `outside the limit: ${outcome}`);
    await store().destroy('sq2');
    await store().destroy('sq');
    assert.deepEqual(await subvolumesOf(scratch().dir, 'sq'), []);
  });
});
