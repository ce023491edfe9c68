// File transfer in and out of a container with the Engine API's archive endpoints. Nothing runs
// inside the container (images may have no shell or mkdir): missing directories of a put are
// created by extracting a tar of just those directories into the deepest existing one, so the
// modes and owners of directories that already exist are never touched.
import { posix } from 'node:path';
import type Docker from 'dockerode';
import { pack } from 'tar-stream';
import { MAX_ARCHIVE_BYTES } from '../../protocol/commands.ts';
import { ArchiveTooLarge, DockerError, dockerMessage, statusCode } from './errors.ts';

export const MODE_DIR = 2 ** 31; // Go's os.ModeDir in the path-stat header
export const MODE_SYMLINK = 2 ** 27;

/** The engine's `X-Docker-Container-Path-Stat`: Go's FileMode bits, mtime RFC 3339, links resolved in the container. */
export interface PathStat {
  name: string;
  size: number;
  mode: number;
  mtime: string;
  linkTarget: string;
}

export function checkContainerPath(path: unknown): string {
  if (typeof path !== 'string' || !path.startsWith('/') || path.includes('\0'))
    throw new DockerError(`container path must be an absolute path, got ${JSON.stringify(path)}`);
  return posix.normalize(path);
}

/** The path's stat as the engine reports it, or null when it does not exist. */
export async function statPath(
  container: Docker.Container,
  service: string,
  path: string,
): Promise<PathStat | null> {
  try {
    const res = (await container.infoArchive({ path })) as {
      headers: Record<string, string | undefined>;
      destroy: () => void;
    };
    // A HEAD answer has no body, but the response holds its socket open until it is released.
    res.destroy();
    const header = res.headers['x-docker-container-path-stat'];
    if (!header) throw new DockerError(`the engine gave no stat for ${path}`);
    return JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as PathStat;
  } catch (err) {
    if (statusCode(err) === 404) return null;
    throw new DockerError(`service '${service}': cannot stat ${path}: ${dockerMessage(err)}`);
  }
}

async function tarOfDirs(dirs: string[], owner: Owner): Promise<Buffer> {
  const p = pack();
  for (const dir of dirs)
    p.entry({ name: `${dir}/`, type: 'directory', mode: 0o755, uid: owner.uid, gid: owner.gid });
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of p) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** mkdir -p without a shell: finds the deepest existing ancestor and extracts the rest into it. */
export interface Owner {
  uid: number;
  gid: number;
}
const ROOT: Owner = { uid: 0, gid: 0 };

export async function ensureDir(
  container: Docker.Container,
  service: string,
  path: string,
  owner: Owner,
): Promise<void> {
  const missing: string[] = [];
  let at = path;
  for (;;) {
    const stat = await statPath(container, service, at);
    if (stat) {
      const isDir = (stat.mode & MODE_DIR) !== 0 || (stat.mode & MODE_SYMLINK) !== 0;
      if (!isDir) throw new DockerError(`service '${service}': ${at} exists and is not a directory`);
      break;
    }
    missing.unshift(posix.basename(at));
    at = posix.dirname(at);
  }
  if (missing.length === 0) return;
  const dirs = missing.map((_, i) => missing.slice(0, i + 1).join('/'));
  try {
    await container.putArchive(await tarOfDirs(dirs, owner), { path: at });
  } catch (err) {
    throw new DockerError(`service '${service}': cannot create ${path}: ${dockerMessage(err)}`);
  }
}

/** Creates `path` (a directory, missing parts owned by `owner`) in the container and extracts `tar` into it. */
export async function putArchiveIn(
  container: Docker.Container,
  service: string,
  path: string,
  tar: Buffer,
  owner: Owner = ROOT,
): Promise<void> {
  const dir = checkContainerPath(path);
  if (tar.length > MAX_ARCHIVE_BYTES)
    throw new ArchiveTooLarge(
      `archive of ${tar.length} bytes is over the 32 MiB limit; send fewer or smaller files`,
    );
  await ensureDir(container, service, dir, owner);
  try {
    await container.putArchive(tar, { path: dir });
  } catch (err) {
    throw new DockerError(`service '${service}': cannot extract into ${dir}: ${dockerMessage(err)}`);
  }
}

/** A tar of `path` (file or directory) from the container; refuses beyond `limit` bytes (32 MiB). */
export async function getArchiveFrom(
  container: Docker.Container,
  service: string,
  path: string,
  limit = MAX_ARCHIVE_BYTES,
): Promise<Buffer> {
  const target = checkContainerPath(path);
  let stream: NodeJS.ReadableStream;
  try {
    stream = await container.getArchive({ path: target });
  } catch (err) {
    throw new DockerError(`service '${service}': ${dockerMessage(err)}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        (stream as unknown as { destroy: () => void }).destroy();
        throw new ArchiveTooLarge(
          `the archive of ${target} in service '${service}' is over the ${sizeText(limit)} limit; fetch a smaller path`,
        );
      }
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof ArchiveTooLarge) throw err;
    throw new DockerError(`service '${service}': reading the archive of ${target}: ${dockerMessage(err)}`);
  }
  return Buffer.concat(chunks);
}

function sizeText(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`;
}
