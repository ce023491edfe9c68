// What the fs.* handlers share: the typed refusal a handler returns as its result (the control
// plane answers it as a 4xx/5xx), the host's bounds on background transfers and watches, and an
// exec inside the container that keeps only the head of its output (a listing stops at its limit
// instead of buffering everything a `find` of `/` prints). Execs run as the service's own user:
// paths resolve in the container's own root, with that user's permissions.
import type Docker from 'dockerode';
import type { FsRefusal, FsRefusalCode } from '../../protocol/fs.ts';
import { sleep } from '../../shared/concurrency.ts';
import type { SidecarContext } from '../context.ts';
import type { Owner } from '../docker/archive.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { DockerError, dockerMessage } from '../docker/errors.ts';
import { Demuxer } from '../docker/mux.ts';
import { resolveUser } from '../docker/users.ts';

export class FsRefused extends Error {
  readonly code: FsRefusalCode;
  constructor(code: FsRefusalCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** Runs a handler; an FsRefused becomes the result's `refusal`, anything else fails the command. */
export async function refusing<T extends object>(
  work: () => Promise<T>,
): Promise<T | { refusal: FsRefusal }> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof FsRefused) return { refusal: { code: err.code, message: err.message } };
    throw err;
  }
}

/** Live fs work of a host that outlives its command: streamed reads and watches. */
export interface FsState {
  transfers: number;
  watches: Map<string, number>;
}

export const fsState = (ctx: SidecarContext): FsState => {
  ctx.fs ??= { transfers: 0, watches: new Map() };
  return ctx.fs;
};

export const MAX_TRANSFERS = 32;

export interface HeadResult {
  stdout: Buffer;
  stderr: string;
  /** null when the output was cut at `maxBytes` (the command was left to die on its closed pipe). */
  exitCode: number | null;
}

const NOT_FOUND = /executable file not found|no such file or directory|not found/i;

/**
 * Runs `argv` in the container as its own user, keeping the first `maxBytes` of stdout; past them the
 * stream is closed. `need` names what the image must have when the program is missing (126/127).
 */
export async function execHead(
  container: Docker.Container,
  service: string,
  argv: string[],
  need: string,
  maxBytes: number,
  timeoutMs = 60_000,
): Promise<HeadResult> {
  let exec: Docker.Exec;
  let stream: NodeJS.ReadableStream & { destroy(): void };
  try {
    // As the container's own user: a container with a non-root user gives even a root exec no
    // capabilities, and the file API acts with the service's own permissions anyway.
    exec = await container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true });
    stream = (await exec.start({ hijack: true, stdin: false })) as typeof stream;
  } catch (err) {
    throw new DockerError(`service '${service}': ${dockerMessage(err)}`);
  }
  const out: Buffer[] = [];
  let outBytes = 0;
  let errText = '';
  let cut = false;
  const done = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      stream.destroy();
      reject(new DockerError(`service '${service}': ${argv[0]} did not finish within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const demux = new Demuxer((type, payload) => {
      if (type === 2) {
        if (errText.length < 4096) errText += payload.toString('utf8');
        return;
      }
      if (cut) return;
      out.push(payload);
      outBytes += payload.length;
      if (outBytes >= maxBytes) {
        cut = true;
        stream.destroy();
        clearTimeout(timer);
        resolve();
      }
    });
    stream.on('data', (c: Buffer) => demux.write(c));
    stream.on('end', () => {
      clearTimeout(timer);
      resolve();
    });
    stream.on('close', () => {
      clearTimeout(timer);
      resolve();
    });
    stream.on('error', (err) => {
      clearTimeout(timer);
      if (cut) resolve();
      else reject(new DockerError(`service '${service}': ${dockerMessage(err)}`));
    });
  });
  await done;
  const stdout = Buffer.concat(out).subarray(0, maxBytes);
  if (cut) return { stdout, stderr: errText, exitCode: null };
  let exitCode: number | null = null;
  for (let i = 0; i < 50 && exitCode === null; i++) {
    const info = await exec.inspect();
    if (!info.Running && typeof info.ExitCode === 'number') exitCode = info.ExitCode;
    else await sleep(20);
  }
  const text = `${errText}${stdout.subarray(0, 2048).toString('utf8')}`;
  if ((exitCode === 126 || exitCode === 127) && NOT_FOUND.test(text))
    throw new FsRefused(
      'unsupported',
      `service '${service}': ${need} (${text.trim().split('\n')[0].slice(0, 300)})`,
    );
  return { stdout, stderr: errText, exitCode };
}

/** Runs a small tool (mv, rm) to the end; a non-zero exit is an error carrying its stderr. */
export async function runTool(
  container: Docker.Container,
  service: string,
  argv: string[],
  need: string,
): Promise<void> {
  const r = await execHead(container, service, argv, need, 64 * 1024);
  if (r.exitCode !== 0 && /permission denied|operation not permitted|read-only file system/i.test(r.stderr))
    throw new FsRefused('refused', `service '${service}': ${argv[0]}: ${r.stderr.trim().slice(0, 500)}`);
  if (r.exitCode !== 0)
    throw new DockerError(
      `service '${service}': ${argv[0]} exited ${r.exitCode}: ${r.stderr.trim().slice(0, 1000)}`,
    );
}

/** Who a service's files belong to: its container's user, resolved in the image's /etc/passwd. */
export async function serviceOwner(engine: DockerEngine, service: string): Promise<Owner> {
  return resolveUser(engine, service, (await engine.inspect(service)).Config.User ?? '');
}
