// Relative binds (`./conf:/etc/app`) are mounted from what was checked, never from a path name.
// Docker resolves a bind source only when that container starts, following links, in dependency
// order: a service already running could swap a later service's source for a link to the host.
// So before any container is created, each source is opened beneath the environment's context
// (pin.ts: no link at any component, a directory or a regular file), and bind-mounted from that
// descriptor onto a staging path under svcd's own data directory (`<data>/binds/<env>/`, 0700,
// which no container mounts and no tenant can write); the compose file names the staging path.
// Staging is redone on every start (create, redeploy, fork, rollback) and undone when the stack
// goes down. Mounting needs root; a svcd that is not root refuses relative binds rather than
// hand Docker the unpinned path.
import { spawn } from 'node:child_process';
import {
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  realpath,
  rmdir,
  stat,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { mounts } from '../storage/mounts.ts';
import { unpin } from '../verify/pinned.ts';
import { DockerError } from './errors.ts';
import { chownPinned, contextWhy, kindOf, type Pinned, pinBeneath } from './pin.ts';

/** service name → the staged host path of each of its binds, in order. */
export type StagedBinds = Record<string, string[]>;

/** `<data>/binds/<env>`: the staging directory of one environment. */
export const stagingDir = (dataDir: string, envId: string) => join(dataDir, 'binds', envId);

const MOUNT_TIMEOUT_MS = 30_000;

/**
 * Pins and mounts every relative bind of `services` under `stageDir` (undoing any staging left
 * there first); returns where each bind is staged. Missing sources are created as directories.
 */
export async function stageBinds(
  stageDir: string,
  datasetDir: string | undefined,
  services: ServiceRecord[],
  isRoot = process.getuid?.() === 0,
): Promise<StagedBinds> {
  await unstageBinds(stageDir);
  if (!services.some((s) => s.binds?.length)) return {};
  if (!datasetDir) throw new DockerError('the spec binds files of the project context, which has no dataset');
  if (!isRoot)
    throw new DockerError(
      `relative binds need svcd to run as root: each checked source is bind-mounted into svcd's staging directory so that no container can swap it before Docker mounts it (this svcd runs as uid ${process.getuid?.()})`,
    );
  await sameMountsAsDockerd();
  await mkdir(dirname(stageDir), { recursive: true, mode: 0o700 });
  await mkdir(stageDir, { mode: 0o700 });
  const out: StagedBinds = {};
  try {
    for (const [i, s] of services.entries()) {
      if (s.binds?.length) out[s.name] = [];
      for (const [j, b] of (s.binds ?? []).entries()) {
        const where = `service '${s.name}': the bind of './${b.source}'`;
        const pinned = await pinBeneath(datasetDir, join('files', b.source), true).catch((err: Error) => {
          throw new DockerError(`${where}: ${contextWhy(err)}`);
        });
        try {
          const target = join(stageDir, `${i}.${j}`);
          await stageOne(pinned, target, b.read_only, s.user, where);
          out[s.name].push(target);
        } finally {
          await unpin(pinned);
        }
      }
    }
  } catch (err) {
    await unstageBinds(stageDir).catch(() => {});
    throw err;
  }
  return out;
}

/**
 * A svcd in a mount namespace of its own (systemd's PrivateTmp, ProtectSystem, …) mounts where
 * dockerd never looks: its containers would get the empty staging path. Said plainly instead,
 * when dockerd's pid file names a dockerd whose namespace can be read.
 */
async function sameMountsAsDockerd(pidFile = '/run/docker.pid'): Promise<void> {
  const pid = (await readFile(pidFile, 'utf8').catch(() => '')).trim();
  if (!/^\d+$/.test(pid)) return;
  const comm = (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
  if (comm !== 'dockerd') return;
  const [theirs, ours] = await Promise.all(
    [`/proc/${pid}/ns/mnt`, '/proc/self/ns/mnt'].map((p) => readlink(p).catch(() => null)),
  );
  if (theirs && ours && theirs !== ours)
    throw new DockerError(
      `svcd runs in another mount namespace than dockerd (pid ${pid}), which would not see its staged relative binds: run svcd without PrivateTmp, ProtectSystem or other mount-namespace options`,
    );
}

async function stageOne(p: Pinned, target: string, readOnly: boolean, user: string, where: string) {
  const dir = p.stat.isDirectory();
  if (!dir && !p.stat.isFile())
    throw new DockerError(`${where} is a ${kindOf(p.stat)}; only a directory or a regular file can be bound`);
  if (!readOnly) await giveToUser(p, user);
  if (dir) await mkdir(target, { mode: 0o700 });
  else await writeFile(target, '', { mode: 0o600, flag: 'wx' });
  await bindFd(p, target, readOnly);
  // What is mounted there now is the inode that was checked, or nothing starts.
  const got = await stat(target);
  if (got.dev !== p.stat.dev || got.ino !== p.stat.ino)
    throw new DockerError(`${where}: the staged mount is not the checked source`);
}

/**
 * The context is extracted as the sidecar's user, so a non-root service could not write to its
 * read-write binds (on a developer's machine the checkout belongs to that user). A root-owned rw
 * bind source is handed, with everything under it, to the service's numeric user: it is the
 * environment's own copy, nothing of the host, and it is walked through pinned descriptors only.
 */
async function giveToUser(p: Pinned, user: string): Promise<void> {
  const m = /^(\d+)(?::(\d+))?$/.exec(user);
  if (!m || m[1] === '0' || p.stat.uid !== 0) return;
  await chownPinned(p, Number(m[1]), Number(m[2] ?? m[1]));
}

/** `mount --bind /proc/self/fd/3 target`, fd 3 being the pinned source: the kernel mounts that inode. */
function bindFd(p: Pinned, target: string, readOnly: boolean): Promise<void> {
  // --no-canonicalize: mount(8) would otherwise turn /proc/self/fd/3 back into a path name.
  const opts = readOnly ? 'ro,nosuid,nodev' : 'nosuid,nodev';
  return mountTool(
    'mount',
    ['--no-canonicalize', '--bind', '-o', opts, '/proc/self/fd/3', target],
    p.handle.fd,
  );
}

/** Runs mount(8) or umount(8), bounded, `fd` (when given) passed as the child's fd 3. */
function mountTool(cmd: 'mount' | 'umount', args: string[], fd?: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: ['ignore', 'ignore', 'pipe', ...(fd === undefined ? [] : [fd])],
      timeout: MOUNT_TIMEOUT_MS,
      env: { ...process.env, LC_ALL: 'C' },
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      if (stderr.length < 4096) stderr += d;
    });
    child.on('error', (err) => reject(new DockerError(`${cmd}: ${err.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve();
      else
        reject(
          new DockerError(`${cmd} ${args.at(-1)} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`),
        );
    });
  });
}

/**
 * Unmounts everything staged under `stageDir` and removes it. Idempotent. The staging paths are
 * removed one by one, never recursively: one still mounted fails here instead of having the
 * tenant's files under it deleted.
 */
export async function unstageBinds(stageDir: string): Promise<void> {
  const real = await realpath(stageDir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (real === null) return;
  const inside = (await mounts()).map((m) => m.point).filter((p) => p.startsWith(`${real}/`));
  for (const point of inside.sort((a, b) => b.length - a.length)) await umount(point);
  for (const name of await readdir(real)) {
    const path = join(real, name);
    if ((await lstat(path)).isDirectory()) await rmdir(path);
    else await unlink(path);
  }
  await rmdir(real);
}

/** A staging mount in use (a process with its cwd there) is detached lazily: it lives on only for whoever holds it. */
function umount(point: string): Promise<void> {
  return mountTool('umount', ['--no-canonicalize', point]).catch(() =>
    mountTool('umount', ['--no-canonicalize', '-l', point]),
  );
}
