// A real Docker container standing in for one provider sandbox: the sandbox fakes create, exec in,
// copy files into and out of, pause and delete these, so what a driver does really runs.
import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import tar from 'tar-stream';

export const docker = new Docker();
export const FAKE_LABEL = 'svc.test.fake';

export interface ExecOut {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
}

export class FileError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Creates and starts a container from a local image; `offline` gives it no network at all. */
export async function createBox(
  fake: string,
  image: string,
  env: Record<string, string>,
  offline: boolean,
): Promise<string> {
  const c = await docker.createContainer({
    name: `svc-fake-${fake}-${randomBytes(5).toString('hex')}`,
    Image: image,
    Entrypoint: ['sleep', '2147483647'],
    Cmd: [],
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: { [FAKE_LABEL]: fake },
    HostConfig: { NetworkMode: offline ? 'none' : 'bridge', Init: true },
  });
  await c.start();
  return c.id;
}

/** Runs argv in the container; `onData` sees output as it arrives. */
export async function execIn(
  id: string,
  argv: string[],
  opts: { user?: string; env?: Record<string, string>; onData?: (fd: 1 | 2, b: Buffer) => void } = {},
): Promise<ExecOut> {
  const ex = await docker.getContainer(id).exec({
    Cmd: argv,
    AttachStdout: true,
    AttachStderr: true,
    User: opts.user ?? '',
    Env: Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`),
  });
  const stream = await ex.start({ hijack: true, stdin: false });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const sink = (fd: 1 | 2, acc: Buffer[]) => {
    const p = new PassThrough();
    p.on('data', (b: Buffer) => {
      acc.push(b);
      opts.onData?.(fd, b);
    });
    return p;
  };
  await new Promise<void>((resolve, reject) => {
    docker.modem.demuxStream(stream, sink(1, out), sink(2, err));
    stream.on('end', () => resolve());
    stream.on('close', () => resolve());
    stream.on('error', reject);
  });
  const info = await ex.inspect();
  return { exitCode: info.ExitCode ?? -1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
}

export async function writeFileIn(id: string, path: string, data: Buffer): Promise<void> {
  const dir = posix.dirname(path);
  const mk = await execIn(id, ['mkdir', '-p', dir]);
  if (mk.exitCode !== 0) throw new FileError(400, mk.stderr.toString().trim());
  const pack = tar.pack();
  pack.entry({ name: posix.basename(path), size: data.length, mode: 0o644 }, data);
  pack.finalize();
  await docker.getContainer(id).putArchive(pack as unknown as NodeJS.ReadableStream, { path: dir });
}

export async function readFileIn(id: string, path: string): Promise<Buffer> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.getContainer(id).getArchive({ path });
  } catch (e) {
    const status = (e as { statusCode?: number }).statusCode;
    if (status === 404) throw new FileError(404, `path '${path}' does not exist`);
    throw e;
  }
  return new Promise((resolve, reject) => {
    const ex = tar.extract();
    let found: Buffer | null = null;
    let dir = false;
    ex.on('entry', (h, s, next) => {
      const chunks: Buffer[] = [];
      s.on('data', (c) => chunks.push(c as Buffer));
      s.on('end', () => {
        if (found === null && !dir) {
          if (h.type === 'directory') dir = true;
          else found = Buffer.concat(chunks);
        }
        next();
      });
    });
    ex.on('finish', () => {
      if (dir) reject(new FileError(400, `path '${path}' is a directory`));
      else resolve(found ?? Buffer.alloc(0));
    });
    ex.on('error', reject);
    stream.pipe(ex);
  });
}

export async function removeBox(id: string): Promise<boolean> {
  try {
    await docker.getContainer(id).remove({ force: true });
    return true;
  } catch {
    return false;
  }
}

export async function setPaused(id: string, paused: boolean): Promise<void> {
  const c = docker.getContainer(id);
  if (paused) await c.pause();
  else await c.unpause();
}

export async function isPaused(id: string): Promise<boolean> {
  return Boolean((await docker.getContainer(id).inspect()).State.Paused);
}

/** Reads a request body with a size limit. */
export async function readBody(req: NodeJS.ReadableStream, limit = 40 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += (c as Buffer).length;
    if (n > limit) throw new FileError(413, 'body too large');
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}
