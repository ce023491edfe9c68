// The one way a file is replaced whole: written to a temp file beside it (same directory, so the
// rename stays on one filesystem), flushed, renamed over the target, and the directory flushed so
// the rename itself survives a crash. A reader sees the old file or the new one, never a torn one,
// and after a power loss the file is one of the two. The temp name is unique, so two writers of
// the same path never write into each other's temp file (the last rename wins).
import { closeSync, fchmodSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { nameSuffix } from '../protocol/ids.ts';

export interface AtomicWriteOptions {
  /** The file's mode, exactly (the umask does not narrow it); default 0o644 less the umask. */
  mode?: number;
  /**
   * False skips both flushes: the rename still makes the write atomic against a crash of the
   * process, but after a power loss the file may be missing or empty. Only for files written on
   * a hot path whose loss the reader already survives. Default true.
   */
  durable?: boolean;
}

const tempBeside = (path: string) => join(dirname(path), `.${basename(path)}.${nameSuffix(8)}.tmp`);

/** Replaces `path` with `data` atomically and durably (see the file comment). */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  opts: AtomicWriteOptions = {},
): Promise<void> {
  const tmp = tempBeside(path);
  try {
    const f = await open(tmp, 'wx', opts.mode ?? 0o644);
    try {
      await f.writeFile(data);
      if (opts.mode !== undefined) await f.chmod(opts.mode);
      if (opts.durable !== false) await f.sync();
    } finally {
      await f.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true }).catch(() => {});
    throw err;
  }
  if (opts.durable === false) return;
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** `writeFileAtomic` for callers that must not yield (start-up, a synchronous store). */
export function writeFileAtomicSync(
  path: string,
  data: string | Uint8Array,
  opts: AtomicWriteOptions = {},
): void {
  const tmp = tempBeside(path);
  try {
    const fd = openSync(tmp, 'wx', opts.mode ?? 0o644);
    try {
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      for (let at = 0; at < buf.length; ) at += writeSync(fd, buf, at);
      if (opts.mode !== undefined) fchmodSync(fd, opts.mode);
      if (opts.durable !== false) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  if (opts.durable === false) return;
  const dir = openSync(dirname(path), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}
