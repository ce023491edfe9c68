// Project context archives (raw tar or tar.gz) on the control plane's disk: streamed in with a
// byte limit and a running sha256 (never held in memory), then indexed in one streaming pass that
// refuses what no project needs: absolute or climbing paths, hard links, devices and fifos, too
// many entries or too many unpacked bytes. Files the parser reads are taken out in a later pass.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import tar from 'tar-stream';
import type { ContextEntry } from '../compose/context.ts';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from '../config/config.ts';
import { BadRequest, TooLarge } from '../errors.ts';

export const MAX_UPLOAD_BYTES = DEFAULT_UPLOAD_LIMITS.maxBytes;

/** What reading one archive may cost (Config.uploads). */
export type ReadBounds = Pick<UploadLimits, 'maxUnpackedBytes' | 'maxEntries' | 'checkMs'>;

/** Streams `body` into `path`; rejects with 413 past `limit` bytes. */
export async function receive(
  body: Readable,
  path: string,
  limit = MAX_UPLOAD_BYTES,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > limit) return done(new TooLarge(`upload larger than ${mib(limit)}`));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  await pipeline(body, meter, createWriteStream(path, { mode: 0o600 }));
  if (bytes === 0) throw new BadRequest('the upload is empty; send a tar archive (raw or gzip)');
  return { sha256: hash.digest('hex'), bytes };
}

/** The archive's bytes, gunzipped when they start with the gzip magic, as pipeline stages. */
async function tarStages(path: string): Promise<Readable[]> {
  const head = await new Promise<Buffer>((resolve, reject) => {
    const s = createReadStream(path, { start: 0, end: 1 });
    const parts: Buffer[] = [];
    s.on('data', (d) => parts.push(d as Buffer));
    s.on('end', () => resolve(Buffer.concat(parts)));
    s.on('error', reject);
  });
  const file = createReadStream(path);
  return head[0] === 0x1f && head[1] === 0x8b ? [file, createGunzip()] : [file];
}

/** `./a/b/` → `a/b`; null for an absolute path or one with `..`. */
export function entryPath(name: string): string | null {
  if (name.startsWith('/') || name.includes('\0')) return null;
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) return null;
  return parts.join('/');
}

type Visit = (path: string, header: tar.Header, stream: AsyncIterable<unknown>) => Promise<void>;

/** `n` bytes for messages: MiB with one decimal, KiB below one MiB. */
export const mib = (n: number) =>
  n < 1024 * 1024 ? `${Math.ceil(n / 1024)} KiB` : `${Math.round((n / 1024 / 1024) * 10) / 10} MiB`;

/**
 * Every entry of the archive, in order. Every byte read out of it counts toward the bound,
 * headers, padding and zero blocks included (a gzip of zero blocks unpacks a thousandfold and
 * names no entry), and the whole walk is bounded in time: past either bound, 413.
 */
async function walk(path: string, visit: Visit, bounds: ReadBounds): Promise<void> {
  const extract = tar.extract();
  let read = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      read += chunk.length;
      if (read > bounds.maxUnpackedBytes)
        return done(
          new TooLarge(
            `the archive unpacks to more than ${mib(bounds.maxUnpackedBytes)} (headers, padding and zero blocks count)`,
          ),
        );
      done(null, chunk);
    },
  });
  const stages = await tarStages(path);
  // Errors of any stage reach the loop below through `extract`, which pipeline destroys with them.
  const flow = pipeline([...stages, meter, extract]).catch(() => {});
  const timer = setTimeout(() => {
    const s = bounds.checkMs / 1000;
    extract.destroy(new TooLarge(`checking the archive took longer than ${s} s; send a smaller archive`));
  }, bounds.checkMs);
  timer.unref();
  try {
    for await (const entry of extract) {
      const p = entryPath(entry.header.name);
      if (p === null)
        throw new BadRequest(`archive entry '${entry.header.name.slice(0, 200)}' is absolute or has '..'`);
      await visit(p, entry.header, entry);
      entry.resume();
    }
  } catch (err) {
    extract.destroy();
    if (err instanceof BadRequest || err instanceof TooLarge) throw err;
    throw new BadRequest(`not a tar archive (raw or gzip): ${(err as Error).message}`);
  } finally {
    clearTimeout(timer);
    for (const s of stages) s.destroy();
    await flow;
  }
}

/** How deep an archive path may go: far past real projects (node_modules nests a few dozen). */
const MAX_DEPTH = 256;

/** Every entry of the archive, validated. */
export async function indexArchive(
  path: string,
  bounds: ReadBounds = DEFAULT_UPLOAD_LIMITS,
): Promise<Map<string, ContextEntry>> {
  const entries = new Map<string, ContextEntry>();
  await walk(
    path,
    async (p, h) => {
      if (entries.size >= bounds.maxEntries)
        throw new BadRequest(`the archive has more than ${bounds.maxEntries} entries`);
      if (p.length > 4096) throw new BadRequest('an archive path is longer than 4096 characters');
      // Each ancestor directory is an entry too. Deepest first, stopping at the first one already
      // known (its own ancestors were added with it): a path of 2,000 one-letter components would
      // otherwise build 2,000 keys of up to 4 KiB, for every such entry.
      let depth = 0;
      for (let i = p.lastIndexOf('/'); i > 0; i = p.lastIndexOf('/', i - 1)) {
        if (++depth > MAX_DEPTH)
          throw new BadRequest(
            `archive path '${p.slice(0, 200)}…' is more than ${MAX_DEPTH} directories deep`,
          );
        const dir = p.slice(0, i);
        if (entries.has(dir)) break;
        entries.set(dir, { kind: 'dir', size: 0 });
      }
      if (entries.size > bounds.maxEntries)
        throw new BadRequest(`the archive has more than ${bounds.maxEntries} entries`);
      if (p === '') return;
      if (h.type === 'directory') entries.set(p, { kind: 'dir', size: 0 });
      else if (h.type === 'file' || h.type === 'contiguous-file')
        entries.set(p, { kind: 'file', size: h.size ?? 0 });
      else if (h.type === 'symlink') entries.set(p, { kind: 'symlink', size: 0, link: h.linkname ?? '' });
      else if (h.type === 'link')
        throw new BadRequest(`archive entry '${p}' is a hard link; archive the file itself`);
      else
        throw new BadRequest(
          `archive entry '${p}' is a ${h.type}; only files, directories and symlinks are accepted`,
        );
    },
    bounds,
  );
  return entries;
}

/** The text of the named files (each at most `max` bytes). */
export async function readFiles(
  path: string,
  wanted: Set<string>,
  max: number,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (wanted.size === 0) return out;
  await walk(
    path,
    async (p, h, stream) => {
      if (!wanted.has(p) || h.type !== 'file' || (h.size ?? 0) > max) return;
      const parts: Buffer[] = [];
      for await (const chunk of stream) parts.push(chunk as Buffer);
      out.set(p, Buffer.concat(parts).toString('utf8'));
    },
    DEFAULT_UPLOAD_LIMITS,
  );
  return out;
}

/**
 * The archive at `path` (a code host's repository archive: one top-level directory such as
 * `owner-repo-1a2b3c4/`) as a tar.gz stream of what is inside that directory. More than one
 * top-level entry is refused; everything else is checked when the result is indexed as an upload.
 */
export function stripTopDirectory(path: string): Readable {
  const p = tar.pack();
  const gz = createGzip();
  pipeline(p, gz).catch(() => {});
  let top: string | null = null;
  walk(
    path,
    async (name, h, stream) => {
      const cut = name.indexOf('/');
      const first = cut < 0 ? name : name.slice(0, cut);
      top ??= first;
      if (first !== top)
        throw new BadRequest(
          `the archive has more than one top-level entry ('${top}', '${first.slice(0, 200)}')`,
        );
      const rest = cut < 0 ? '' : name.slice(cut + 1);
      if (rest === '') return;
      const header = { name: rest, mode: h.mode, mtime: h.mtime, linkname: h.linkname };
      if (h.type === 'file' || h.type === 'contiguous-file')
        await pipeline(stream as Readable, p.entry({ ...header, type: 'file', size: h.size }));
      else p.entry({ ...header, type: h.type });
    },
    DEFAULT_UPLOAD_LIMITS,
  ).then(
    () => p.finalize(),
    (err: Error) => {
      p.destroy(err);
      gz.destroy(err);
    },
  );
  return gz;
}

/** Copies the stored archive to a writable (the sidecar's one-time download). */
export async function streamTo(path: string, to: NodeJS.WritableStream): Promise<void> {
  await pipeline(createReadStream(path), to);
}
