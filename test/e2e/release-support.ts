// What the release tests share: reading an executable's ELF header and its SEA blob, and finding the
// machine's own Node (not the project's pinned one) to run the npm package with.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { accessSync, closeSync, constants, openSync, readFileSync, readSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** ELF e_machine values: x86-64 and AArch64. */
export const EM = { amd64: 62, arm64: 183 } as const;

export function elfMachine(path: string): number {
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(20);
    readSync(fd, head, 0, 20, 0);
    assert.deepEqual([...head.subarray(0, 4)], [0x7f, 0x45, 0x4c, 0x46], `${path} is an ELF file`);
    assert.equal(head[4], 2, `${path} is 64-bit`);
    assert.equal(head[5], 1, `${path} is little-endian`);
    return head.readUInt16LE(18);
  } finally {
    closeSync(fd);
  }
}

/** A SEA has its fuse flipped and carries the bundled program (which has the build version in it). */
export function assertSea(path: string, version: string): void {
  const bytes = readFileSync(path);
  assert.ok(bytes.includes('NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1'), `${path}: SEA fuse flipped`);
  assert.ok(bytes.includes(JSON.stringify(version)), `${path}: the blob carries build ${version}`);
}

/** The first `node` on PATH outside any node_modules: the machine's own (Node 20 here), not node@24. */
export function systemNode(): { path: string; version: string } {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir || dir.includes('node_modules')) continue;
    const path = join(dir, 'node');
    try {
      accessSync(path, constants.X_OK);
    } catch {
      continue;
    }
    const version = execFileSync(path, ['--version'], { encoding: 'utf8' }).trim();
    if (path !== process.execPath) return { path, version };
  }
  throw new Error('no system node on PATH outside node_modules: the npm package needs one to be tested');
}
