// fs.watch: a directory's direct entries looked at every FS_LIMITS.watchPollMs by the listing of
// entries.ts (find inside the container, so it works in any image that can list, without inotify
// or a mount of the container's file system on the host), each look compared with the last:
// new path → create, gone → remove, same inode at a new path → rename, same path with another size,
// mtime or inode → write. Events go to the control plane as JSON lines on one streamed PUT to its
// one-time URL; the watch ends when that request ends (the client left), or with an `end` event
// when the directory or the container is gone. Bounds: FS_LIMITS (entries looked at, events per
// look, a `gap` event for the rest, watches per environment and host, 1 MiB unsent).
import { PassThrough } from 'node:stream';
import type { Results } from '../../protocol/commands.ts';
import { FS_LIMITS, type FsEvent } from '../../protocol/fs.ts';
import { sleep } from '../../shared/concurrency.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import type { CommandContext } from '../runner.ts';
import { cleanPath, type Listed, listDir, statEntry } from './entries.ts';
import { directory } from './ops.ts';
import { FsRefused, fsState, refusing } from './tools.ts';
import { isTemp } from './transfer.ts';

const MAX_UNSENT = 1024 * 1024;

/** What changed between two looks at a directory. */
export function diff(prev: Map<string, Listed>, now: Listed[]): FsEvent[] {
  const nowPaths = new Set(now.map((l) => l.entry.path));
  const goneByInode = new Map<string, string>();
  for (const [path, old] of prev) if (!nowPaths.has(path) && old.inode) goneByInode.set(old.inode, path);
  const renamed = new Set<string>();
  const events: FsEvent[] = [];
  for (const cur of now) {
    const path = cur.entry.path;
    const old = prev.get(path);
    if (old && old.inode === cur.inode) {
      const changed = old.entry.size !== cur.entry.size || old.entry.mtime !== cur.entry.mtime;
      if (changed && cur.entry.type !== 'dir') events.push({ type: 'write', path });
      continue;
    }
    const from = cur.inode ? goneByInode.get(cur.inode) : undefined;
    if (from !== undefined) {
      goneByInode.delete(cur.inode);
      renamed.add(from);
      events.push({ type: 'rename', from, path });
      continue;
    }
    events.push({ type: old ? 'write' : 'create', path });
  }
  for (const path of prev.keys())
    if (!nowPaths.has(path) && !renamed.has(path)) events.push({ type: 'remove', path });
  return events;
}

const byPath = (listed: Listed[]) => new Map(listed.map((l) => [l.entry.path, l]));
/** The file API's own temporary files come and go inside one write: its rename is the event. */
const visible = (listed: Listed[]) => listed.filter((l) => !isTemp(l.entry.name));

export function fsWatch(ctx: SidecarContext, cmd: CommandContext<'fs.watch'>): Promise<Results['fs.watch']> {
  return refusing(async () => {
    const { service, upload } = cmd.payload;
    const path = cleanPath(cmd.payload.path);
    const state = fsState(ctx);
    const total = [...state.watches.values()].reduce((a, b) => a + b, 0);
    const mine = state.watches.get(cmd.envId) ?? 0;
    if (total >= FS_LIMITS.watchesPerHost || mine >= FS_LIMITS.watchesPerEnv)
      throw new FsRefused(
        'busy',
        `at most ${FS_LIMITS.watchesPerEnv} watches per environment and ${FS_LIMITS.watchesPerHost} per host`,
      );
    const c = await engineOf(ctx, cmd.envId).container(service);
    await directory(c, service, path);
    const first = await listDir(c, service, path, 1, FS_LIMITS.watchMaxEntries);
    state.watches.set(cmd.envId, mine + 1);
    const out = new PassThrough();
    const ended = fetch(upload.url, {
      method: 'PUT',
      headers: { authorization: `Bearer ${upload.token}`, 'content-type': 'application/x-ndjson' },
      body: out as unknown as AsyncIterable<Uint8Array>,
      duplex: 'half',
    } as RequestInit)
      .then((r) => r.body?.cancel())
      .catch(() => {});
    let open = true;
    void ended.then(() => {
      open = false;
    });
    const line = (e: FsEvent | { type: 'ping' }) => {
      // A control plane that stopped reading: the watch ends rather than buffering without bound.
      if (out.writableLength > MAX_UNSENT) open = false;
      else out.write(`${JSON.stringify(e)}\n`);
    };
    // A first line at once: the request (and so the client's answer) starts before any change.
    line({ type: 'ping' });
    const loop = async () => {
      let prev = byPath(visible(first.listed));
      if (first.truncated)
        line({
          type: 'gap',
          reason: `more than ${FS_LIMITS.watchMaxEntries} entries: only the first are watched`,
        });
      let quiet = Date.now();
      while (open) {
        await sleep(FS_LIMITS.watchPollMs);
        if (!open) break;
        let now: Listed[];
        try {
          now = visible((await listDir(c, service, path, 1, FS_LIMITS.watchMaxEntries)).listed);
          if (now.length === 0 && !(await statEntry(c, service, path)))
            throw new Error(`${path} was removed`);
        } catch (err) {
          line({ type: 'end', reason: (err as Error).message.slice(0, 500) });
          break;
        }
        const events = diff(prev, now);
        prev = byPath(now);
        for (const e of events.slice(0, FS_LIMITS.watchMaxEvents)) line(e);
        if (events.length > FS_LIMITS.watchMaxEvents)
          line({ type: 'gap', dropped: events.length - FS_LIMITS.watchMaxEvents });
        if (events.length > 0) quiet = Date.now();
        else if (Date.now() - quiet >= FS_LIMITS.watchHeartbeatMs) {
          line({ type: 'ping' });
          quiet = Date.now();
        }
      }
    };
    loop()
      .catch((err) => ctx.log(`fs.watch ${path} of ${cmd.envId}/${service}: ${(err as Error).message}`))
      .finally(() => {
        out.end();
        const left = (state.watches.get(cmd.envId) ?? 1) - 1;
        if (left > 0) state.watches.set(cmd.envId, left);
        else state.watches.delete(cmd.envId);
      });
    return {};
  });
}
