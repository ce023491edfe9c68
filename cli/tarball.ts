// Archives for `files put` and `files get`. Packing tars a local file or directory under its base
// name and refuses anything over the 32 MiB upload limit before reading it. Extracting treats the
// archive as hostile: only regular files and directories are written, only inside the target
// directory, never through or as a link; absolute paths, `..` and device/fifo entries refuse the
// whole archive before anything is written; symlinks and hardlinks are skipped and reported.
import {
  closeSync,
  constants,
  fchmodSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  type Stats,
  statSync,
  writeSync,
} from 'node:fs';
import { basename, join, resolve } from 'node:path';
import tar from 'tar-stream';
import { MAX_ARCHIVE_BYTES } from '../protocol/commands.ts';
import { CliError } from './errors.ts';

const BLOCK = 512;

interface LocalEntry {
  name: string;
  path: string;
  stat: Stats;
}

const padded = (n: number) => Math.ceil(n / BLOCK) * BLOCK;
/** Header, a pax header for long names, and the padded content. */
const tarSize = (e: LocalEntry) =>
  BLOCK + (e.name.length > 99 ? 3 * BLOCK : 0) + (e.stat.isFile() ? padded(e.stat.size) : 0);

function walk(local: string, skipped: string[]): LocalEntry[] {
  const top = resolve(local);
  let stat: Stats;
  try {
    // The path the user named is followed if it is a link; links inside it are not.
    stat = statSync(top);
  } catch (err) {
    throw new CliError(
      `cannot read ${local}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const name = basename(top);
  if (!name) throw new CliError(`cannot pack ${local}: it has no base name to put it under`);
  const out: LocalEntry[] = [];
  let bytes = 2 * BLOCK;
  const add = (e: LocalEntry) => {
    bytes += tarSize(e);
    if (bytes > MAX_ARCHIVE_BYTES)
      throw new CliError(`${local} is larger than 32 MiB as a tar archive: files put uploads at most 32 MiB`);
    out.push(e);
  };
  const visit = (path: string, entryName: string, st: Stats) => {
    if (st.isDirectory()) {
      add({ name: entryName, path, stat: st });
      for (const child of readdirSync(path).sort()) {
        const p = join(path, child);
        visit(p, `${entryName}/${child}`, lstatSync(p));
      }
    } else if (st.isFile() || st.isSymbolicLink()) {
      add({ name: entryName, path, stat: st });
    } else {
      skipped.push(`${entryName}: not a regular file, directory or symlink`);
    }
  };
  visit(top, name, stat);
  return out;
}

/** A tar of `local` under its base name; throws before reading content when it would exceed 32 MiB. */
export async function packPath(local: string): Promise<{ data: Buffer; entries: number; skipped: string[] }> {
  const skipped: string[] = [];
  const entries = walk(local, skipped);
  const p = tar.pack();
  const collected = (async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of p) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  })();
  for (const e of entries) {
    // Owned by root in the container, like `docker cp`: the local uid means nothing there.
    const base = { name: e.name, mode: e.stat.mode & 0o777, mtime: e.stat.mtime, uid: 0, gid: 0 };
    await new Promise<void>((res, rej) => {
      const done = (err?: Error | null) => (err ? rej(err) : res());
      if (e.stat.isDirectory()) p.entry({ ...base, type: 'directory' }, done);
      else if (e.stat.isSymbolicLink())
        p.entry({ ...base, type: 'symlink', linkname: readlinkSync(e.path) }, done);
      else p.entry({ ...base, type: 'file' }, readFileSync(e.path), done);
    });
  }
  p.finalize();
  const data = await collected;
  if (data.length > MAX_ARCHIVE_BYTES)
    throw new CliError(`${local} is larger than 32 MiB as a tar archive: files put uploads at most 32 MiB`);
  return { data, entries: entries.length, skipped };
}

interface ArchiveEntry {
  /** Normalised relative segments. */
  parts: string[];
  type: 'file' | 'directory' | 'link';
  mode: number;
  linkname: string;
  linkKind: string;
  data: Buffer;
}

/** Reads every entry and refuses the archive if any name or type is unsafe. */
async function readArchive(data: Buffer): Promise<ArchiveEntry[]> {
  const ex = tar.extract();
  const out: ArchiveEntry[] = [];
  const reading = (async () => {
    for await (const entry of ex) {
      const chunks: Buffer[] = [];
      // tar-stream never ends the stream of a directory entry that declares a size: a hostile
      // archive would hang `files get` here (the tar fuzz found it). A directory has no content to read.
      if (entry.header.type !== 'directory') for await (const c of entry) chunks.push(c as Buffer);
      const h = entry.header;
      const raw = h.name;
      const refuse = (why: string) =>
        new CliError(`refusing the archive: ${JSON.stringify(raw)}: ${why}; nothing was written`);
      if (raw.includes('\0')) throw refuse('a NUL byte in the name');
      if (raw.startsWith('/')) throw refuse('absolute path');
      const parts = raw.split('/').filter((s) => s !== '' && s !== '.');
      if (parts.includes('..')) throw refuse("'..' in the path");
      const type = h.type ?? 'file';
      let kind: ArchiveEntry['type'];
      if (type === 'file' || type === 'contiguous-file') kind = 'file';
      else if (type === 'directory') kind = 'directory';
      else if (type === 'symlink' || type === 'link') kind = 'link';
      else if (type === 'fifo' || type === 'character-device' || type === 'block-device')
        throw refuse(`${type} entries are never extracted`);
      else throw refuse(`unsupported entry type ${type}`);
      out.push({
        parts,
        type: kind,
        mode: h.mode ?? 0o644,
        linkname: h.linkname ?? '',
        linkKind: type === 'link' ? 'hardlink' : 'symlink',
        data: Buffer.concat(chunks),
      });
    }
  })();
  ex.end(data);
  try {
    await reading;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`the server sent an archive that is not a valid tar: ${(err as Error).message}`);
  }
  return out;
}

const lstatOrNull = (p: string): Stats | null => {
  try {
    return lstatSync(p, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
};

/** Refuses a path whose existing components are a link or not a directory (it would lead out). */
function checkOnDisk(root: string, e: ArchiveEntry): void {
  let at = root;
  e.parts.forEach((part, i) => {
    at = join(at, part);
    const st = lstatOrNull(at);
    if (!st) return;
    const last = i === e.parts.length - 1;
    const where = e.parts.slice(0, i + 1).join('/');
    if (st.isSymbolicLink())
      throw new CliError(
        `refusing to write ${e.parts.join('/')}: ${where} is a symlink on disk; nothing was written`,
      );
    if (!last && !st.isDirectory())
      throw new CliError(`refusing to write ${e.parts.join('/')}: ${where} is not a directory`);
    if (last && e.type === 'file' && !st.isFile())
      throw new CliError(`refusing to write ${where}: something other than a regular file is there`);
    if (last && e.type === 'directory' && !st.isDirectory())
      throw new CliError(`refusing to write ${where}/: something other than a directory is there`);
  });
}

function ensureDirs(root: string, parts: string[]): void {
  let at = root;
  for (const part of parts) {
    at = join(at, part);
    const st = lstatOrNull(at);
    if (!st) mkdirSync(at, { mode: 0o755 });
    else if (st.isSymbolicLink() || !st.isDirectory())
      throw new CliError(`refusing to write under ${at}: not a plain directory`);
  }
}

function writeFile(root: string, e: ArchiveEntry): void {
  ensureDirs(root, e.parts.slice(0, -1));
  // O_NOFOLLOW: a link that appeared at the last component makes the open fail instead of leading out.
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const mode = (e.mode & 0o755) | 0o600;
  const fd = openSync(join(root, ...e.parts), flags, mode);
  try {
    fchmodSync(fd, mode);
    let off = 0;
    while (off < e.data.length) off += writeSync(fd, e.data, off);
  } finally {
    closeSync(fd);
  }
}

export interface ExtractResult {
  files: number;
  dirs: number;
  skipped: string[];
}

/** Extracts `data` into `dir` (created if missing) under the rules at the top of this file. */
export async function extractSafely(data: Buffer, dir: string): Promise<ExtractResult> {
  const entries = await readArchive(data);
  const root = resolve(dir);
  const rootStat = lstatOrNull(root) && statSync(root);
  if (rootStat && !rootStat.isDirectory()) throw new CliError(`${dir} exists and is not a directory`);
  const result: ExtractResult = { files: 0, dirs: 0, skipped: [] };
  // Paths of skipped links: whatever an archive puts "under" one is skipped too.
  const links: string[] = [];
  const underLink = (e: ArchiveEntry) => {
    const path = e.parts.join('/');
    return links.find((l) => path === l || path.startsWith(`${l}/`));
  };
  const plan: ArchiveEntry[] = [];
  for (const e of entries) {
    if (e.parts.length === 0) continue;
    const path = e.parts.join('/');
    const link = underLink(e);
    if (e.type === 'link') {
      links.push(path);
      result.skipped.push(`${path} (${e.linkKind} to ${e.linkname}): links are never extracted`);
    } else if (link) {
      result.skipped.push(`${path}: under the skipped link ${link}`);
    } else {
      plan.push(e);
    }
  }
  if (rootStat) for (const e of plan) checkOnDisk(root, e);
  mkdirSync(root, { recursive: true });
  for (const e of plan) {
    try {
      if (e.type === 'directory') {
        ensureDirs(root, e.parts);
        result.dirs++;
      } else {
        writeFile(root, e);
        result.files++;
      }
    } catch (err) {
      if (err instanceof CliError) throw err;
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new CliError(`cannot write ${join(dir, ...e.parts)}: ${code} (${result.files} files written)`);
    }
  }
  return result;
}
