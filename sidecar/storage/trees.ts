// Test helpers: fill a volume with everything a copy can get wrong (owners, modes, set-uid,
// symlinks, hard links, holes, nested and empty directories) and describe a tree exactly enough
// that two descriptions are equal only when the trees are.
import { createHash } from 'node:crypto';
import {
  chmod,
  chown,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';

/** Only root may give files away; as another user every file keeps its owner. */
const chownIfRoot = (path: string, uid: number, gid: number) =>
  process.getuid?.() === 0 ? chown(path, uid, gid) : Promise.resolve();

/** Writes a volume whose every detail depends on `tag`. */
export async function populate(dir: string, tag: string): Promise<void> {
  await writeFile(join(dir, 'data.txt'), `data ${tag}\n`);
  await chmod(join(dir, 'data.txt'), 0o640);
  await chownIfRoot(join(dir, 'data.txt'), 1234, 5678);
  await link(join(dir, 'data.txt'), join(dir, 'hard'));
  await symlink('data.txt', join(dir, 'link'));
  await symlink('/nonexistent/target', join(dir, 'dangling'));
  await mkdir(join(dir, 'sub', 'deep'), { recursive: true });
  await writeFile(join(dir, 'sub', 'deep', 'file.bin'), createHash('sha512').update(tag).digest());
  await chmod(join(dir, 'sub'), 0o750);
  await chownIfRoot(join(dir, 'sub'), 1000, 1000);
  await mkdir(join(dir, 'empty'));
  await writeFile(join(dir, 'tool'), '#!/bin/sh\n');
  await chmod(join(dir, 'tool'), 0o4755);
  const fh = await open(join(dir, 'sparse'), 'w');
  await fh.truncate(8 * 1024 * 1024);
  await fh.write(tag, 4 * 1024 * 1024);
  await fh.close();
  await chownIfRoot(dir, 1000, 1000);
  await chmod(dir, 0o711);
}

/** Changes content, metadata and structure, so a rollback has something to undo. */
export async function modify(dir: string, tag: string): Promise<void> {
  await writeFile(join(dir, 'data.txt'), `changed ${tag}\n`);
  await rm(join(dir, 'sub'), { recursive: true, force: true });
  await writeFile(join(dir, `new-${tag}.txt`), tag);
  await chmod(dir, 0o700);
}

/**
 * One line per entry, sorted: path, type, mode, owner, size, mtime, content digest or link target,
 * the first path of a hard-link group, and whether a file keeps its holes.
 */
export async function describeTree(root: string): Promise<string[]> {
  const out: string[] = [];
  const inodes = new Map<number, string>();
  const walk = async (rel: string): Promise<void> => {
    const path = join(root, rel);
    const st = await lstat(path);
    const type = st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : st.isFile() ? 'f' : '?';
    const parts = [rel || '.', type, (st.mode & 0o7777).toString(8), `${st.uid}:${st.gid}`];
    if (type === 'f') {
      const digest = createHash('sha256')
        .update(await readFile(path))
        .digest('hex');
      parts.push(String(st.size), String(Math.floor(st.mtimeMs)), digest.slice(0, 16));
      if (st.size > 1024 * 1024) parts.push(st.blocks * 512 < st.size / 2 ? 'sparse' : 'dense');
      if (st.nlink > 1) {
        const first = inodes.get(st.ino);
        if (first) parts.push(`=${first}`);
        else inodes.set(st.ino, rel);
      }
    }
    if (type === 'l') parts.push(`-> ${await readlink(path)}`);
    out.push(parts.join(' '));
    if (type === 'd') for (const e of (await readdir(path)).sort()) await walk(rel ? join(rel, e) : e);
  };
  await walk('');
  return out;
}
