// fs.read and fs.write: one regular file in or out of a service's container, streamed through the
// Engine API's archive endpoints (the engine resolves every path inside the container's root, so
// a link can only lead elsewhere in the container), never held whole in memory.
//
// Read: the archive of the path (a link's target as the engine resolves it) is opened and its
// first entry checked: only a regular file within the size cap is sent (a device, FIFO, socket or
// directory is refused). The result gives the size at once and the bytes are PUT to the control
// plane's one-time URL in the background, so a slow reader does not hold the environment's queue.
//
// Write: the bytes are fetched from the control plane and packed, as they arrive, into a tar of
// one entry: a temporary file beside the target, owned by the service's user with the given mode
// (never setuid/setgid), extracted by the engine, then renamed over the target by `mv` inside the
// container, so a reader sees the old file or the new one, never a part.
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract, type Header, pack } from 'tar-stream';
import type { BlobRef, Results } from '../../protocol/commands.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { ensureDir } from '../docker/archive.ts';
import { DockerError, dockerMessage, statusCode } from '../docker/errors.ts';
import type { CommandContext } from '../runner.ts';
import { cleanPath, statEntry } from './entries.ts';
import { existing } from './ops.ts';
import { stallWatch } from './stall.ts';
import { execHead, FsRefused, fsState, MAX_TRANSFERS, refusing, runTool, serviceOwner } from './tools.ts';

/** A write's temporary file is `.<name>.svc-<12 hex>` beside its target (watches do not report it). */
export const TEMP_SUFFIX = '.svc-';
export const isTemp = (name: string) => /^\..+\.svc-[0-9a-f]{12}$/.test(name);

const WRITE_NEEDS = 'writing needs test and mv (coreutils or busybox) for the atomic rename';

const auth = (b: BlobRef) => ({ authorization: `Bearer ${b.token}` });

/** The archive's first entry, its body still to be read. */
function firstEntry(archive: NodeJS.ReadableStream): Promise<{ header: Header; body: Readable }> {
  const ex = extract();
  return new Promise((resolve, reject) => {
    ex.once('entry', (header, body, next) => {
      body.once('end', next);
      resolve({ header, body: body as unknown as Readable });
    });
    ex.on('error', reject);
    ex.on('finish', () => reject(new DockerError('the engine sent an empty archive')));
    archive.on('error', (err) => ex.destroy(err as Error));
    archive.pipe(ex);
  });
}

const WHAT: Record<string, string> = {
  'character-device': 'a device node',
  'block-device': 'a device node',
  fifo: 'a FIFO',
  symlink: 'a link',
  link: 'a hard link entry',
  directory: 'a directory',
};

export function fsRead(ctx: SidecarContext, cmd: CommandContext<'fs.read'>): Promise<Results['fs.read']> {
  return refusing(async () => {
    const { service, upload, max_bytes: max } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    const state = fsState(ctx);
    if (state.transfers >= MAX_TRANSFERS)
      throw new FsRefused('busy', `this host is already sending ${MAX_TRANSFERS} files; try again shortly`);
    const c = await engineOf(ctx, cmd.envId).container(service);
    const s = await existing(c, service, path);
    if (s.entry.type === 'dir')
      throw new FsRefused('is_a_dir', `${path} in service '${service}' is a directory`);
    const target = s.entry.type === 'symlink' ? s.stat.linkTarget : path;
    let archive: NodeJS.ReadableStream & { destroy(): void };
    try {
      archive = (await c.getArchive({ path: target })) as typeof archive;
    } catch (err) {
      if (statusCode(err) === 404)
        throw new FsRefused('not_found', `${path} in service '${service}' leads nowhere`);
      throw new DockerError(`service '${service}': reading ${path}: ${dockerMessage(err)}`);
    }
    const { header, body } = await firstEntry(archive).catch((err) => {
      archive.destroy();
      throw err;
    });
    // What is sent is what was checked: this entry's own type and size, not an earlier stat.
    const type = header.type ?? 'file';
    const size = header.size ?? 0;
    const refusal =
      type === 'directory'
        ? new FsRefused('is_a_dir', `${path} in service '${service}' is a directory`)
        : type !== 'file'
          ? new FsRefused(
              'not_a_file',
              `${path} in service '${service}' is ${WHAT[type] ?? type}; only regular files are read`,
            )
          : size > max
            ? new FsRefused('too_large', `${path} is ${size} bytes, over the ${max}-byte file limit`)
            : null;
    if (refusal) {
      archive.destroy();
      throw refusal;
    }
    state.transfers++;
    send(upload, body, size)
      .catch((err) => ctx.log(`fs.read ${path} of ${cmd.envId}/${service}: ${(err as Error).message}`))
      .finally(() => {
        state.transfers--;
        archive.destroy();
      });
    return { size };
  });
}

async function send(upload: BlobRef, body: Readable, size: number): Promise<void> {
  const watch = stallWatch('sending a file to the control plane');
  body.once('error', (err) => watch.stream.destroy(err));
  body.pipe(watch.stream);
  try {
    const r = await fetch(upload.url, {
      method: 'PUT',
      headers: { ...auth(upload), 'content-type': 'application/octet-stream', 'x-svc-size': String(size) },
      body: watch.stream as unknown as AsyncIterable<Uint8Array>,
      duplex: 'half',
      signal: watch.signal,
    } as RequestInit);
    await r.body?.cancel();
    if (!r.ok) throw new Error(`the control plane refused the file: HTTP ${r.status}`);
  } finally {
    watch.stream.destroy();
  }
}

/** Passes exactly `size` bytes; more is an error (the control plane sends what it declared). */
function exactly(size: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > size) return done(new Error(`the body is longer than its declared ${size} bytes`));
      done(null, chunk);
    },
  });
}

export function fsWrite(ctx: SidecarContext, cmd: CommandContext<'fs.write'>): Promise<Results['fs.write']> {
  return refusing(async () => {
    const { service, blob, size, mode, max_bytes: max } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    if (size > max) throw new FsRefused('too_large', `${size} bytes is over the ${max}-byte file limit`);
    if (path === '/') throw new FsRefused('is_a_dir', 'the root directory cannot be written as a file');
    const engine = engineOf(ctx, cmd.envId);
    const c = await engine.container(service);
    // A link at `path` is replaced by the rename, not followed; a directory is never replaced.
    if ((await statEntry(c, service, path))?.entry.type === 'dir')
      throw new FsRefused('is_a_dir', `${path} in service '${service}' is a directory`);
    const owner = await serviceOwner(engine, service);
    const dir = posix.dirname(path);
    await ensureDir(c, service, dir, owner);
    // The rename runs as the service's user: a directory it cannot write is refused before any
    // byte lands there (its temporary file could not be renamed, nor removed again).
    const writable = await execHead(c, service, ['test', '-w', dir], WRITE_NEEDS, 1024);
    if (writable.exitCode !== 0)
      throw new FsRefused('refused', `service '${service}': its user cannot write the directory ${dir}`);
    const tmpName = `.${posix.basename(path).slice(0, 200)}${TEMP_SUFFIX}${randomBytes(6).toString('hex')}`;
    const tmp = posix.join(dir, tmpName);
    const watch = stallWatch('fetching the file from the control plane');
    const r = await fetch(blob.url, { headers: auth(blob), signal: watch.signal }).catch((err) => {
      watch.stream.destroy();
      throw err;
    });
    if (!r.ok || !r.body) {
      watch.stream.destroy();
      throw new Error(`fetching the file from the control plane: HTTP ${r.status}`);
    }
    const tar = pack();
    const entry = tar.entry({
      name: tmpName,
      type: 'file',
      size,
      mode: mode & 0o777,
      uid: owner.uid,
      gid: owner.gid,
    });
    const incoming = Readable.fromWeb(r.body as never);
    const feed = pipeline(incoming, watch.stream, exactly(size), entry).then(() => tar.finalize());
    let placed = false;
    try {
      const put = c.putArchive(tar as unknown as NodeJS.ReadableStream, { path: dir }).then(() => {
        placed = true;
      });
      await Promise.all([
        feed.catch((err) => {
          tar.destroy(err);
          throw err;
        }),
        put,
      ]);
      await runTool(c, service, ['mv', '-f', '--', tmp, path], WRITE_NEEDS);
    } catch (err) {
      // Whatever part of the temporary file was extracted goes; the target was never touched.
      incoming.destroy();
      watch.stream.destroy();
      tar.destroy();
      await execHead(c, service, ['rm', '-f', '--', tmp], 'rm', 4096).catch(() => {});
      if (err instanceof FsRefused) throw err;
      throw new DockerError(
        `service '${service}': writing ${path}${placed ? ' (renaming)' : ''}: ${dockerMessage(err)}`,
      );
    }
    return { size };
  });
}
