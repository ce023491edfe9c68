// An upload (env.put) is rewritten before Docker extracts it: every entry is owned by
// the service's own user, loses setuid/setgid bits, PAX ownership and xattrs; devices, FIFOs and
// other special entries are refused; the files' total real size (PAX sparse counted expanded) is
// capped. Docker's archive API then extracts only what this produced.
import { extract, type Header, pack } from 'tar-stream';
import {
  expandedSize,
  expandedTooLarge,
  keptPax,
  MAX_UPLOAD_EXPANDED_BYTES,
  safeMode,
  uploadRefusal,
} from '../../protocol/uploads.ts';
import type { Owner } from './archive.ts';
import { DockerError } from './errors.ts';

export class UploadRefused extends DockerError {}

/** The archive, rewritten entry by entry for `owner`; UploadRefused for what may not be extracted. */
export async function rewriteUpload(tar: Buffer, owner: Owner): Promise<Buffer> {
  const ex = extract();
  const out = pack();
  const chunks: Buffer[] = [];
  out.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const packed = new Promise<void>((resolve, reject) => {
    out.on('end', resolve);
    out.on('error', reject);
  });
  let expanded = 0;
  let refused: UploadRefused | null = null;
  const read = new Promise<void>((resolve, reject) => {
    ex.on('entry', (h, stream, next) => {
      const refusal = uploadRefusal(h);
      expanded += expandedSize(h);
      if (refusal) refused ??= new UploadRefused(`upload refused: ${refusal}`);
      else if (expanded > MAX_UPLOAD_EXPANDED_BYTES)
        refused ??= new UploadRefused(expandedTooLarge(expanded));
      // A truncated entry errors on its own stream; unheard, that error would end the process.
      stream.on('error', (err: Error) => ex.destroy(err));
      if (refused) {
        // The rest is only read through (the archive is at most 32 MiB); nothing more is packed.
        // tar-stream never ends the body of a directory that declares a size: go on at once.
        stream.resume();
        if (h.type === 'directory') next();
        else stream.on('end', next);
        return;
      }
      const type = h.type ?? 'file';
      const header: Partial<Header> & { name: string; pax?: Record<string, string> } = {
        name: h.name,
        type,
        mode: safeMode(h.mode, type),
        uid: owner.uid,
        gid: owner.gid,
        mtime: h.mtime,
        linkname: h.linkname,
        size: type === 'file' ? h.size : 0,
        pax: keptPax(h),
      };
      const body: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        body.push(c as Buffer);
      });
      stream.on('end', () => {
        const done = (err?: Error | null) => (err ? ex.destroy(err) : next());
        // Only a file carries bytes: tar-stream errors, on a stream nobody listens to, when another kind
        // of entry is given a body, and a hostile archive can declare a directory or a link with
        // data. Such bytes are dropped, as tar(1) would drop them.
        if (type === 'file') out.entry(header, Buffer.concat(body), done);
        else out.entry(header, Buffer.alloc(0), done);
      });
    });
    ex.on('finish', () => (refused ? reject(refused) : resolve()));
    ex.on('error', reject);
  });
  ex.end(tar);
  try {
    await read;
  } catch (err) {
    out.destroy();
    if (err instanceof UploadRefused) throw err;
    // What was refused first says more than the parse error it led to.
    if (refused) throw refused;
    throw new UploadRefused(`upload is not a valid tar archive: ${(err as Error).message}`);
  }
  out.finalize();
  await packed;
  return Buffer.concat(chunks);
}
