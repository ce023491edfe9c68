// `dir` storage: plain directories copied with `cp -a --reflink=auto`. cp keeps owners, modes,
// timestamps, xattrs/ACLs, hard links within the tree and holes of sparse files; on a data dir that
// supports reflinks (XFS with reflink=1, btrfs, bcachefs) every copy is a copy-on-write clone, so
// only metadata is written. Elsewhere a copy costs time proportional to the data.
import { mkdir, rm } from 'node:fs/promises';
import { run, syncFs } from './exec.ts';
import type { Layout } from './layout.ts';
import { TreeBackend, type TreeOps } from './tree.ts';

/** `-T`: the destination is the copy itself, never a directory to copy into. */
export async function copyTree(src: string, dst: string): Promise<void> {
  await run('cp', ['-a', '--reflink=auto', '-T', '--', src, dst]);
}

export const dirOps: TreeOps = {
  kind: 'dir',
  async create(path) {
    await mkdir(path);
  },
  copy: (src, dst) => copyTree(src, dst),
  remove: (path) => rm(path, { recursive: true, force: true }),
  flush: (dir) => syncFs(dir),
  isNative: async () => true,
};

export function dirBackend(layout: Layout): TreeBackend {
  return new TreeBackend(layout, dirOps);
}
