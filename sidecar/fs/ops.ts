// fs.stat, fs.list, fs.mkdir, fs.move and fs.remove in a service's container. Stat and mkdir use
// the Engine API's archive endpoints (nothing needed in the image; paths resolve inside the
// container's root, links included); list, move and remove run find, mv and rm inside the
// container as the container's own user (the file API acts with the service's permissions). A missing path, a wrong type or a missing program is a typed refusal.
import { posix } from 'node:path';
import type Docker from 'dockerode';
import type { Results } from '../../protocol/commands.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { ensureDir } from '../docker/archive.ts';
import type { CommandContext } from '../runner.ts';
import { cleanPath, listDir, statEntry } from './entries.ts';
import { FsRefused, refusing, runTool, serviceOwner } from './tools.ts';

const missing = (service: string, path: string) =>
  new FsRefused('not_found', `${path} does not exist in service '${service}'`);

/** The path's stat, or a not_found refusal. */
export async function existing(container: Docker.Container, service: string, path: string) {
  const s = await statEntry(container, service, path);
  if (!s) throw missing(service, path);
  return s;
}

/** A directory, or a link to one (resolved inside the container); refusals otherwise. */
export async function directory(container: Docker.Container, service: string, path: string): Promise<void> {
  const s = await existing(container, service, path);
  const type =
    s.entry.type === 'symlink'
      ? (await statEntry(container, service, s.stat.linkTarget))?.entry.type
      : s.entry.type;
  if (type !== 'dir') throw new FsRefused('not_a_dir', `${path} in service '${service}' is not a directory`);
}

export function fsStat(ctx: SidecarContext, cmd: CommandContext<'fs.stat'>): Promise<Results['fs.stat']> {
  return refusing(async () => {
    const { service } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    const c = await engineOf(ctx, cmd.envId).container(service);
    return { entry: (await existing(c, service, path)).entry };
  });
}

export async function fsList(
  ctx: SidecarContext,
  cmd: CommandContext<'fs.list'>,
): Promise<Results['fs.list']> {
  const r = await refusing(async () => {
    const { service, depth, limit } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    const c = await engineOf(ctx, cmd.envId).container(service);
    await directory(c, service, path);
    const { listed, truncated } = await listDir(c, service, path, depth, limit);
    return { entries: listed.map((l) => l.entry), truncated };
  });
  return 'entries' in r ? r : { ...r, entries: [], truncated: false };
}

export function fsMkdir(ctx: SidecarContext, cmd: CommandContext<'fs.mkdir'>): Promise<Results['fs.mkdir']> {
  return refusing(async () => {
    const { service } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    const engine = engineOf(ctx, cmd.envId);
    const c = await engine.container(service);
    const s = await statEntry(c, service, path);
    if (s) {
      if (s.entry.type === 'dir') return { created: false };
      throw new FsRefused('not_a_dir', `${path} in service '${service}' exists and is not a directory`);
    }
    try {
      await ensureDir(c, service, path, await serviceOwner(engine, service));
    } catch (err) {
      if (/is not a directory/.test((err as Error).message))
        throw new FsRefused('not_a_dir', (err as Error).message);
      throw err;
    }
    return { created: true };
  });
}

export function fsMove(ctx: SidecarContext, cmd: CommandContext<'fs.move'>): Promise<Results['fs.move']> {
  return refusing(async () => {
    const { service } = cmd.payload;
    const from = cleanPath(cmd.payload.from);
    const to = cleanPath(cmd.payload.to);
    if (from === '/' || to === '/')
      throw new FsRefused('refused', 'the root directory cannot be moved or replaced');
    const c = await engineOf(ctx, cmd.envId).container(service);
    await existing(c, service, from);
    await directory(c, service, posix.dirname(to));
    // mv onto an existing directory would move into it: a move names the new path itself.
    if ((await statEntry(c, service, to))?.entry.type === 'dir')
      throw new FsRefused('is_a_dir', `${to} in service '${service}' is an existing directory`);
    await runTool(c, service, ['mv', '-f', '--', from, to], 'moving needs mv (coreutils or busybox)');
    return {};
  });
}

export function fsRemove(
  ctx: SidecarContext,
  cmd: CommandContext<'fs.remove'>,
): Promise<Results['fs.remove']> {
  return refusing(async () => {
    const { service } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    if (path === '/') throw new FsRefused('refused', 'the root directory cannot be removed');
    const c = await engineOf(ctx, cmd.envId).container(service);
    await existing(c, service, path);
    // Recursive for a directory; a link is removed itself, never what it points to.
    await runTool(c, service, ['rm', '-rf', '--', path], 'removing needs rm (coreutils or busybox)');
    return {};
  });
}
