// The project context on the host: it lives in the environment's own dataset (`svc.context`), as
// `<dataset>/files/` plus `<dataset>/sha256`, so it is snapshotted, forked and rolled back with the
// volumes. It is fetched once per digest through the control plane's one-time URL and extracted
// as hostile input (only files, directories and links, never through a link, no `..`). Bind
// sources are pinned and staged right before every start (bind-staging.ts).
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, open, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadable } from 'node:stream/web';
import { createGunzip } from 'node:zlib';
import tar from 'tar-stream';
import type { BlobRef, Payloads } from '../../protocol/commands.ts';
import { CONTEXT_VOLUME, type ServiceRecord } from '../../protocol/spec.ts';
import { PayloadError } from '../payload.ts';

export const MAX_CONTEXT_BYTES = 512 * 1024 * 1024;
const SHA = /^[0-9a-f]{64}$/;

export const contextFiles = (datasetDir: string) => join(datasetDir, 'files');

/** Context-relative path: normalised, no '..', no absolute. */
function relPath(raw: unknown, what: string): string {
  if (typeof raw !== 'string' || raw.startsWith('/') || raw.includes('\0') || raw.length > 4096)
    throw new PayloadError(`${what} must be a path inside the project context`);
  const parts = raw.split('/').filter((x) => x !== '' && x !== '.');
  if (parts.includes('..')) throw new PayloadError(`${what} '${raw.slice(0, 100)}' must not contain '..'`);
  return parts.join('/');
}

/**
 * The rules for the context fields of a payload's services (binds, build), whose shape was checked
 * on receipt; context-relative paths are normalised in place.
 */
export function checkProjectFields(services: ServiceRecord[], volumes: string[]): void {
  for (const s of services) {
    const needs = (s.binds?.length ?? 0) > 0 || s.build !== undefined;
    if (needs && !volumes.includes(CONTEXT_VOLUME))
      throw new PayloadError(`service '${s.name}' uses the project context, which the spec does not carry`);
    for (const b of s.binds ?? []) {
      b.source = relPath(b.source, `service '${s.name}': bind source`);
      if (!b.target.startsWith('/') || b.target.split('/').includes('..'))
        throw new PayloadError(`service '${s.name}': bind target must be an absolute path`);
    }
    if (s.build) {
      s.build.context = relPath(s.build.context, `service '${s.name}': build context`);
      s.build.dockerfile = relPath(s.build.dockerfile, `service '${s.name}': dockerfile`);
      if (!s.build.dockerfile) throw new PayloadError(`service '${s.name}': dockerfile is empty`);
    }
  }
}

/** payload.context of env.create (its shape checked on receipt): a digest and an http(s) blob. */
export function contextOf(payload: Payloads['env.create']): { sha256: string; blob: BlobRef } | null {
  const c = payload.context;
  if (!c) return null;
  if (!SHA.test(c.sha256)) throw new PayloadError('payload.context.sha256 is not a digest');
  if (!/^https?:\/\//.test(c.blob.url)) throw new PayloadError('payload.context.blob must be {url, token}');
  return c;
}

/**
 * Makes the dataset hold the context with this digest: kept when it already does (a redeploy of
 * the same bytes keeps what the stack wrote into its binds), else fetched and extracted afresh.
 */
export async function ensureContext(
  datasetDir: string,
  ctx: { sha256: string; blob: BlobRef },
  progress: (line: string) => void,
): Promise<'kept' | 'fetched'> {
  const marker = join(datasetDir, 'sha256');
  const have = await readFile(marker, 'utf8').catch(() => '');
  if (have.trim() === ctx.sha256) return 'kept';
  const archive = join(datasetDir, '.download');
  const r = await fetch(ctx.blob.url, {
    headers: { authorization: `Bearer ${ctx.blob.token}` },
    signal: AbortSignal.timeout(30 * 60_000),
  });
  if (!r.ok || !r.body)
    throw new Error(`fetching the project context from the control plane: HTTP ${r.status}`);
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      if (bytes > MAX_CONTEXT_BYTES) return done(new Error('the project context is larger than 512 MiB'));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  const body = Readable.fromWeb(r.body as WebReadable);
  await pipeline(body, meter, createWriteStream(archive, { mode: 0o600 }));
  const got = hash.digest('hex');
  if (got !== ctx.sha256) {
    await rm(archive, { force: true });
    throw new Error(`the project context's digest is ${got}, expected ${ctx.sha256}`);
  }
  const files = contextFiles(datasetDir);
  await rm(files, { recursive: true, force: true });
  await mkdir(files, { recursive: true });
  const count = await extract(archive, files);
  await rm(archive, { force: true });
  await writeFile(marker, `${ctx.sha256}\n`);
  progress(`project context ${ctx.sha256.slice(0, 12)}: ${count} entries, ${bytes} bytes`);
  return 'fetched';
}

async function extract(archive: string, root: string): Promise<number> {
  const head = Buffer.alloc(2);
  const fd = await open(archive);
  await fd.read(head, 0, 2, 0);
  await fd.close();
  const file = createReadStream(archive);
  const source = head[0] === 0x1f && head[1] === 0x8b ? file.pipe(createGunzip()) : file;
  const ex = tar.extract();
  source.on('error', (err: Error) => ex.destroy(err));
  source.pipe(ex);
  let count = 0;
  for await (const entry of ex) {
    const h = entry.header;
    const rel = relPath(h.name, 'archive entry');
    count++;
    if (rel === '') {
      entry.resume();
      continue;
    }
    const dest = join(root, rel);
    await safeParent(root, dest);
    if (h.type === 'directory') await mkdir(dest, { recursive: true, mode: 0o755 });
    else if (h.type === 'file' || h.type === 'contiguous-file') {
      await pipeline(entry, createWriteStream(dest, { mode: (h.mode ?? 0o644) & 0o777 }));
      continue;
    } else if (h.type === 'symlink') await symlink(h.linkname ?? '', dest);
    else
      throw new Error(
        `archive entry '${rel}' is a ${h.type}; only files, directories and links are extracted`,
      );
    entry.resume();
  }
  return count;
}

/** Creates the parent directories of `dest`, refusing to write through a link. */
async function safeParent(root: string, dest: string): Promise<void> {
  const parent = dirname(dest);
  await mkdir(parent, { recursive: true, mode: 0o755 });
  const real = await realpath(parent);
  const top = await realpath(root);
  if (real !== top && !real.startsWith(`${top}/`))
    throw new Error(`archive entry ${dest} lies behind a link`);
  const st = await lstat(dest).catch(() => null);
  if (st) throw new Error(`archive entry ${dest.slice(root.length + 1)} appears twice`);
}
