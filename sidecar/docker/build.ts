// build: through the Engine API. The build context (a directory of the project context in the
// environment's dataset) is streamed as a tar, links packed as links (never followed; a link on
// the way to the context is refused), with the context's .dockerignore honoured. The image is
// tagged by content (the control plane computed the tag from the context digest and the options),
// so an image already present is reused: a redeploy of the same bytes does not rebuild, and forks
// never build at all.
import { readlink } from 'node:fs/promises';
import type Docker from 'dockerode';
import { pack } from 'tar-stream';
import { compileIgnore } from '../../protocol/dockerignore.ts';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { listPinned, openPinned, type Pinned, pinChild, unpin } from '../verify/pinned.ts';
import { BUILD_OWNER_LABEL } from './build-gc.ts';
import { DockerError, dockerMessage } from './errors.ts';
import { fdPath, kindOf, pinBeneath } from './pin.ts';

export const BUILD_LABEL = 'svc.build';

async function exists(docker: Docker, image: string): Promise<string | null> {
  try {
    return (await docker.getImage(image).inspect()).Id;
  } catch {
    return null;
  }
}

/**
 * A tar stream of the directory `rel` beneath `root` (links as links), leaving out what
 * .dockerignore excludes. The context is a tree a running container may be changing: the way to
 * it is opened without following any link (a link there is refused), and every entry is reached
 * through its pinned parent and read through its own pinned descriptor (pin.ts), so a directory
 * swapped for a link during the walk is packed as that link, never entered.
 */
export async function contextTar(root: string, rel = ''): Promise<NodeJS.ReadableStream> {
  const top = await pinBeneath(root, rel).catch((err: Error) => {
    throw new DockerError(`build context './${rel}': ${err.message}`);
  });
  if (!top.stat.isDirectory()) {
    await unpin(top);
    throw new DockerError(`build context './${rel}' is a ${kindOf(top.stat)}, not a directory`);
  }
  const p = pack();
  const walk = async (dir: Pinned, at: string, ignore: (path: string, isDir: boolean) => boolean) => {
    for (const name of (await listPinned(dir)).sort()) {
      const path = at ? `${at}/${name}` : name;
      const child = await pinChild(dir, name); // null: removed meanwhile
      if (!child) continue;
      try {
        const st = child.stat;
        if (ignore(path, st.isDirectory()) && !(path === 'Dockerfile' || path === '.dockerignore')) continue;
        const header = { name: path, mode: st.mode & 0o7777, mtime: st.mtime, uid: 0, gid: 0 };
        if (st.isDirectory()) {
          p.entry({ ...header, type: 'directory' });
          await walk(child, path, ignore);
        } else if (st.isSymbolicLink()) {
          p.entry({ ...header, type: 'symlink', linkname: await readlink(fdPath(dir, name)) });
        } else if (st.isFile()) {
          await packFile(p, header, st.size, child);
        }
      } finally {
        await unpin(child);
      }
    }
  };
  (async () => {
    try {
      const ignore = compileIgnore(await readPinned(top, '.dockerignore'));
      await walk(top, '', ignore);
      p.finalize();
    } finally {
      await unpin(top);
    }
  })().catch((err) => p.destroy(err));
  return p as unknown as NodeJS.ReadableStream;
}

/**
 * One file entry, its bytes read from the pinned inode: exactly the `size` its header declares,
 * however a running service grows the file meanwhile (more bytes would corrupt the tar).
 */
async function packFile(p: ReturnType<typeof pack>, header: Headers, size: number, file: Pinned) {
  if (size === 0) return packEmpty(p, header);
  const fh = await openPinned(file);
  try {
    await new Promise<void>((resolve, reject) => {
      // A file cut short meanwhile fails its entry and the whole tar ("Size mismatch"), as an
      // 'error' event too: unheard, that event would be an uncaught exception of svcd.
      const sink = p.entry({ ...header, type: 'file', size }, (err) => (err ? reject(err) : resolve()));
      sink.on('error', reject);
      fh.createReadStream({ autoClose: false, start: 0, end: size - 1 })
        .on('error', reject)
        .pipe(sink);
    });
  } finally {
    await fh.close();
  }
}

function packEmpty(p: ReturnType<typeof pack>, header: Headers): Promise<void> {
  return new Promise((resolve, reject) => {
    p.entry({ ...header, type: 'file', size: 0 }, Buffer.alloc(0), (err) => (err ? reject(err) : resolve()));
  });
}

/** The text of the regular file `name` in a pinned directory; '' when it is absent or not a file. */
/** Docker's own .dockerignore files are a few hundred bytes; 1 MiB is far past any real one. */
const MAX_DOCKERIGNORE_BYTES = 1024 * 1024;

async function readPinned(dir: Pinned, name: string): Promise<string> {
  const file = await pinChild(dir, name);
  if (!file?.stat.isFile()) {
    await unpin(file);
    return '';
  }
  try {
    // A running service can write its own context: the file is read only up to a bound.
    if (file.stat.size > MAX_DOCKERIGNORE_BYTES)
      throw new DockerError(
        `${name} is ${file.stat.size} bytes, over the ${MAX_DOCKERIGNORE_BYTES} byte limit`,
      );
    const fh = await openPinned(file);
    try {
      const buf = Buffer.alloc(MAX_DOCKERIGNORE_BYTES + 1);
      const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
      if (bytesRead > MAX_DOCKERIGNORE_BYTES)
        throw new DockerError(`${name} grew past the ${MAX_DOCKERIGNORE_BYTES} byte limit while it was read`);
      return buf.subarray(0, bytesRead).toString('utf8');
    } finally {
      await fh.close();
    }
  } finally {
    await unpin(file);
  }
}

type Headers = { name: string; mode: number; mtime: Date; uid: number; gid: number };

/**
 * Builds every service with a `build` whose image is not on this host yet, streaming the build
 * output as progress lines; returns service → image id of the built (or reused) images.
 */
export async function buildImages(
  docker: Docker,
  services: ServiceRecord[],
  filesDir: string,
  progress: (line: string) => void,
  /** `deny` stacks build without a network, as they run: nothing leaves during a build either. */
  egress: 'deny' | 'allow' = 'deny',
  /** This sidecar's owner id (build-gc.ts): only its own builds are ever collected by it. */
  owner = '',
): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const s of services) {
    if (!s.build) continue;
    const have = await exists(docker, s.image);
    if (have) {
      progress(`build ${s.name}: reusing ${s.image.slice(0, 22)} (same context and options)`);
      ids[s.name] = have;
      continue;
    }
    progress(`build ${s.name}: building from ./${s.build.context || '.'} (${s.build.dockerfile})`);
    const tar = await contextTar(filesDir, s.build.context);
    let stream: NodeJS.ReadableStream;
    try {
      stream = await docker.buildImage(tar, {
        t: s.image,
        dockerfile: s.build.dockerfile,
        buildargs: s.build.args,
        ...(s.build.target ? { target: s.build.target } : {}),
        labels: { [BUILD_LABEL]: s.name, ...(owner ? { [BUILD_OWNER_LABEL]: owner } : {}) },
        rm: true,
        forcerm: true,
        ...(egress === 'deny' ? { networkmode: 'none' } : {}),
      });
    } catch (err) {
      throw new DockerError(`build of service '${s.name}' failed: ${dockerMessage(err)}`);
    }
    await follow(docker, stream, s.name, progress);
    const id = await exists(docker, s.image);
    if (!id) throw new DockerError(`build of service '${s.name}' produced no image ${s.image}`);
    ids[s.name] = id;
  }
  return ids;
}

interface BuildEvent {
  stream?: string;
  error?: string;
  errorDetail?: { message?: string };
}

function follow(
  docker: Docker,
  stream: NodeJS.ReadableStream,
  service: string,
  progress: (l: string) => void,
) {
  return new Promise<void>((resolve, reject) => {
    let failure = '';
    docker.modem.followProgress(
      stream,
      (err: Error | null) => {
        if (err || failure)
          reject(new DockerError(`build of service '${service}' failed: ${failure || err?.message}`));
        else resolve();
      },
      (e: BuildEvent) => {
        if (e.error) failure = e.errorDetail?.message ?? e.error;
        for (const line of (e.stream ?? '').split('\n')) {
          const text = line.trimEnd();
          if (text) progress(`build ${service}: ${text.slice(0, 500)}`);
        }
      },
    );
  });
}
