import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fsType, run } from '../../sidecar/storage/exec.ts';
import {
  type FsTier,
  fsTier,
  loopFs,
  type Scratch,
  tmpDataDir,
  zfsPool,
} from '../../sidecar/storage/fixtures.ts';
import { openStorage, type StorageBackend } from '../../sidecar/storage/index.ts';
import { SMALL_FILES, writeVolume } from './volume.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    sizes: { type: 'string', default: '5,500' },
    only: { type: 'string', default: 'dir,xfs,btrfs,zfs' },
  },
});
const RUNS = Math.max(1, Number(values.runs));
const SIZES_MB = values.sizes.split(',').map(Number);
const ONLY = new Set(values.only.split(','));

interface Setup {
  key: string;
  skip: false | string;
  make: () => Promise<Scratch>;
}

const setups: Setup[] = [
  { key: 'dir', skip: false, make: tmpDataDir },
  { key: 'xfs', skip: tierOrFalse('xfs'), make: () => loopFs('xfs', 3072) },
  { key: 'btrfs', skip: tierOrFalse('btrfs'), make: () => loopFs('btrfs', 3072) },
  { key: 'zfs', skip: tierOrFalse('zfs'), make: () => zfsPool(3072) },
];

function tierOrFalse(tier: FsTier): false | string {
  return ONLY.has(tier) ? fsTier(tier) : false;
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  await run('sync', []);
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

interface Row {
  backend: string;
  mb: number;
  clone: number;
  snapshot: number;
  rollback: number;
  cp: number;
  cpNoReflink: number;
}

type Op = 'clone' | 'snapshot' | 'rollback' | 'cp' | 'cpNoReflink';
const OPS: Op[] = ['clone', 'snapshot', 'rollback', 'cp', 'cpNoReflink'];

/** One env per size with its volume written and snapshotted as `ver_0`, and a target volume for cp. */
async function volumes(store: StorageBackend, mb: number) {
  const env = `bench-${mb}mb`;
  const volume = (await store.prepare(env, ['data'])).data;
  // cp's target is another volume of the same backend, so it copies within one file system.
  const cpVolume = (await store.prepare(`${env}-cp`, ['data'])).data;
  await writeVolume(volume, mb);
  await store.snapshot(env, 'ver_0', ['data']);
  const copy = (i: number, extra: string[]) => run('cp', ['-a', ...extra, volume, join(cpVolume, `c${i}`)]);
  const ops: Record<Op, [(i: number) => Promise<unknown>, (i: number) => Promise<unknown>]> = {
    clone: [(i) => store.clone(env, 'ver_0', `${env}-f${i}`, ['data']), (i) => store.destroy(`${env}-f${i}`)],
    snapshot: [(i) => store.snapshot(env, `ver_${i + 1}`, ['data']), async () => {}],
    rollback: [() => store.rollback(env, 'ver_0', ['data']), async () => {}],
    cp: [(i) => copy(i, []), (i) => rm(join(cpVolume, `c${i}`), { recursive: true })],
    cpNoReflink: [
      (i) => copy(i, ['--reflink=never']),
      (i) => rm(join(cpVolume, `c${i}`), { recursive: true }),
    ],
  };
  return { mb, ops, done: () => Promise.all([store.destroy(env), store.destroy(`${env}-cp`)]) };
}

/**
 * Each operation is one series in which the sizes alternate run by run, so both sizes meet the
 * same machine load (other work on a shared host moves single figures by milliseconds). Series
 * are kept apart so one's background freeing of 500 MB does not land in another. Run -1 warms up.
 */
async function measure(store: StorageBackend, backend: string): Promise<Row[]> {
  const sets = [];
  for (const mb of SIZES_MB) sets.push(await volumes(store, mb));
  const rows = sets.map((set) => ({ backend, mb: set.mb }) as Row);
  for (const op of OPS) {
    process.stderr.write(`${backend}: ${op} x ${RUNS} runs...\n`);
    const times = sets.map(() => [] as number[]);
    for (let i = -1; i < RUNS; i++) {
      for (const [k, set] of sets.entries()) {
        const [act, undo] = set.ops[op];
        const ms = await timed(() => act(i + 1));
        if (i >= 0) times[k].push(ms);
        await undo(i + 1);
      }
    }
    for (const [k, row] of rows.entries()) row[op] = median(times[k]);
  }
  for (const set of sets) await set.done();
  return rows;
}

async function bench(setup: Setup): Promise<Row[]> {
  const scratch = await setup.make();
  try {
    const store = await openStorage({ dataDir: scratch.dir, zfsPool: scratch.pool });
    const where = scratch.pool ? `zfs-fuse pool` : await fsType(scratch.dir);
    return await measure(store, `${store.kind} on ${where}${setup.key === 'dir' ? ` (${tmpdir()})` : ''}`);
  } finally {
    await scratch.cleanup();
  }
}

const ms = (x: number) => `${x.toFixed(1)} ms`;

function print(rows: Row[]): void {
  const head = ['backend', 'size', 'clone', 'snapshot', 'rollback', 'cp -a', 'cp -a --reflink=never'];
  const lines = rows.map((r) => [
    r.backend,
    `${r.mb} MB`,
    ms(r.clone),
    ms(r.snapshot),
    ms(r.rollback),
    ms(r.cp),
    ms(r.cpNoReflink),
  ]);
  console.log(`| ${head.join(' | ')} |\n|${head.map(() => '---').join('|')}|`);
  for (const l of lines) console.log(`| ${l.join(' | ')} |`);
  console.log(`\nmedian of ${RUNS} runs; volume = ${SMALL_FILES} files of 4 KiB + one large file\n`);
  const [lo, hi] = [Math.min(...SIZES_MB), Math.max(...SIZES_MB)];
  for (const backend of new Set(rows.map((r) => r.backend))) {
    const a = rows.find((r) => r.backend === backend && r.mb === lo);
    const b = rows.find((r) => r.backend === backend && r.mb === hi);
    if (!a || !b || lo === hi) continue;
    const ratio = (k: 'clone' | 'cp') => (b[k] / a[k]).toFixed(2);
    console.log(`${backend}: clone ${hi}MB/${lo}MB = ${ratio('clone')}x (cp -a: ${ratio('cp')}x)`);
  }
}

const rows: Row[] = [];
for (const setup of setups) {
  if (!ONLY.has(setup.key)) continue;
  if (setup.skip) {
    console.log(`${setup.key}: skipped: ${setup.skip}`);
    continue;
  }
  rows.push(...(await bench(setup)));
}
print(rows);
