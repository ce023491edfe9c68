// What a disk limit across an env's volumes costs the storage operations training loops
// repeat: N forks of one version, then a snapshot, a rollback and a destroy of each fork, with the
// same run's baseline without limits. btrfs with full quota accounting rescans after each fork
// (and after snapshots/rollbacks of envs that share data across groups); with simple quotas
// (kernel 6.7+) it never does; zfs has a `quota` on the env dataset.
//   node bench/fork/disk-limit.ts [--forks 10] [--only btrfs,btrfs-simple,zfs]
import { parseArgs } from 'node:util';
import { enableSimpleQuotas, simpleQuotaUnavailable } from '../../sidecar/storage/btrfs-simple.ts';
import { fsTier, loopFs, type Scratch, zfsPool } from '../../sidecar/storage/fixtures.ts';
import { openStorage } from '../../sidecar/storage/index.ts';
import { unmountUnder } from '../../sidecar/storage/quota.ts';
import { writeVolume } from './volume.ts';

const { values } = parseArgs({
  options: {
    forks: { type: 'string', default: '10' },
    only: { type: 'string', default: 'btrfs,btrfs-simple,zfs' },
  },
});
const FORKS = Math.max(1, Number(values.forks));
const ONLY = new Set(values.only.split(','));

const setups: { key: string; tier: 'btrfs' | 'zfs'; make: () => Promise<Scratch>; simple?: boolean }[] = [
  { key: 'btrfs', tier: 'btrfs', make: () => loopFs('btrfs', 2048) },
  { key: 'btrfs-simple', tier: 'btrfs', make: () => loopFs('btrfs', 2048), simple: true },
  { key: 'zfs', tier: 'zfs', make: () => zfsPool(2048) },
];

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function measure(scratch: Scratch, limited: boolean): Promise<Record<string, string>> {
  const store = await openStorage({ dataDir: scratch.dir, zfsPool: scratch.pool });
  const src = limited ? 'srcl' : 'src';
  if (limited) await store.setQuota(src, 1 << 30);
  const paths = await store.prepare(src, ['a', 'b']);
  await writeVolume(paths.a, 20);
  await writeVolume(paths.b, 100);
  await store.snapshot(src, 'v1', ['a', 'b']);
  const ms: Record<string, number[]> = { fork: [], snapshot: [], rollback: [], destroy: [] };
  const time = async (what: string, fn: () => Promise<unknown>) => {
    const t = performance.now();
    await fn();
    ms[what].push(performance.now() - t);
  };
  const forks = Array.from({ length: FORKS }, (_, i) => `${src}f${i}`);
  for (const f of forks)
    await time('fork', async () => {
      if (limited) await store.setQuota(f, 1 << 30);
      await store.clone(src, 'v1', f, ['a', 'b']);
    });
  for (const f of forks) await time('snapshot', () => store.snapshot(f, 'v2', ['a', 'b']));
  for (const f of forks) await time('rollback', () => store.rollback(f, 'v2', ['a', 'b']));
  for (const f of forks) await time('destroy', () => store.destroy(f));
  await store.destroy(src);
  return Object.fromEntries(
    Object.entries(ms).map(([k, v]) => [k, `${Math.round(median(v))} ms (last ${Math.round(v.at(-1)!)})`]),
  );
}

for (const setup of setups) {
  if (!ONLY.has(setup.key)) continue;
  const skip = fsTier(setup.tier) || (setup.simple ? simpleQuotaUnavailable() : null);
  if (skip) {
    console.log(`${setup.key}: ${skip}`);
    continue;
  }
  const scratch = await setup.make();
  try {
    if (setup.simple) await enableSimpleQuotas(scratch.dir);
    const baseline = await measure(scratch, false);
    const limited = await measure(scratch, true);
    console.log(`${setup.key}, ${FORKS} forks of a 120 MB version (medians):`);
    for (const op of Object.keys(baseline))
      console.log(`  ${op.padEnd(9)} no limit ${baseline[op].padEnd(20)} with limit ${limited[op]}`);
  } finally {
    await unmountUnder(scratch.dir);
    await scratch.cleanup();
  }
}
