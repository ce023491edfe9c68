// envd's `filesystem.Filesystem` Connect-RPC service over svc's file API (server/envs/fs.ts), in
// the sandbox's agent service. svc's refusals become Connect codes the SDK maps to its errors
// (not_found → NotFoundError, already_exists → makeDir's false). Watches are svc's (one directory
// level, polled): WatchDir streams them; CreateWatcher keeps one and GetWatcherEvents drains it.
import type { IncomingMessage } from 'node:http';
import { posix } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import {
  type EntryInfo,
  EntryInfoSchema,
  EventType,
  type FilesystemEvent,
  FilesystemEventSchema,
  FileType,
} from '../../protocol/e2b/envd/gen/filesystem/filesystem_pb.js';
import type { FsEntry, FsEvent } from '../../protocol/fs.ts';
import { newId } from '../../protocol/ids.ts';
import type { AppContext } from '../context.ts';
import * as fs from '../envs/fs.ts';
import { callSignal, rpcCall, sandboxOf } from './rpc-context.ts';
import type { E2bSandboxRow } from './store.ts';
import { resolvePath, sandboxTarget, userOf } from './target.ts';

/** Events a watcher made by CreateWatcher keeps until they are read; older ones are dropped. */
export const MAX_WATCHER_EVENTS = 1000;
/** Watchers per sandbox kept by CreateWatcher. */
export const MAX_WATCHERS_PER_SANDBOX = 8;
const MAX_LINE = 64 * 1024;
const ENDED_KEPT_MS = 60_000;

const TYPES: Record<FsEntry['type'], FileType> = {
  file: FileType.FILE,
  dir: FileType.DIRECTORY,
  symlink: FileType.SYMLINK,
  other: FileType.UNSPECIFIED,
};

function permissions(mode: number, type: FsEntry['type']): string {
  const t = type === 'dir' ? 'd' : type === 'symlink' ? 'L' : '-';
  let out = t;
  for (let shift = 6; shift >= 0; shift -= 3) {
    const bits = (mode >> shift) & 7;
    out += `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${bits & 1 ? 'x' : '-'}`;
  }
  return out;
}

export function entryInfo(e: FsEntry): EntryInfo {
  return create(EntryInfoSchema, {
    name: e.name,
    type: TYPES[e.type],
    path: e.path,
    size: BigInt(e.size),
    mode: e.mode,
    permissions: permissions(e.mode, e.type),
    owner: '',
    group: '',
    modifiedTime: timestampFromDate(new Date(e.mtime)),
  });
}

const EVENTS: Partial<Record<FsEvent['type'], EventType>> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  rename: EventType.RENAME,
};

/** An svc watch event as envd's (its name relative to the watched directory); null for gap and end. */
function fsEvent(e: FsEvent, dir: string): FilesystemEvent | null {
  const type = EVENTS[e.type];
  if (type === undefined || !e.path) return null;
  return create(FilesystemEventSchema, { name: posix.relative(dir, e.path) || e.path, type });
}

/** The host's JSON lines of a watch, one parsed object at a time; a line past 64 KiB ends it. */
async function* lines(body: IncomingMessage): AsyncGenerator<FsEvent | { type: 'ping' }> {
  let buf = '';
  body.setEncoding('utf8');
  for await (const chunk of body) {
    buf += chunk as string;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        yield JSON.parse(line);
      } catch {}
    }
    if (buf.length > MAX_LINE) return;
  }
}

interface Watcher {
  sandbox: string;
  body: IncomingMessage;
  events: FilesystemEvent[];
  error: ConnectError | null;
}

type Ctx = { row: E2bSandboxRow; user: string };
type Req<T> = T & object;

/** The service's implementation for one control plane (its watchers live here). */
export function filesystemService(ctx: AppContext) {
  const watchers = new Map<string, Watcher>();
  const who = (c: HandlerContext): Ctx => ({
    row: sandboxOf(c),
    user: userOf(undefined, c.requestHeader.get('authorization') ?? undefined),
  });
  const at = async (c: Ctx, path: string) => {
    const t = await sandboxTarget(ctx, c.row);
    return { ...t, where: { service: t.service, path: resolvePath(path, c.user) } };
  };
  const call = rpcCall;
  const stat = (c: Ctx, path: string) =>
    call(async () => {
      const t = await at(c, path);
      return entryInfo(await fs.stat(ctx, t.caller, t.envId, t.where));
    });
  const watch = (c: Ctx, path: string, recursive: boolean) =>
    call(async () => {
      if (recursive)
        throw new ConnectError(
          'recursive watches are not offered: svc watches one directory level',
          Code.Unimplemented,
        );
      const t = await at(c, path);
      return { dir: t.where.path, body: await fs.watch(ctx, t.caller, t.envId, t.where) };
    });

  const impl = {
    stat: async (req: Req<{ path: string }>, c: HandlerContext) => ({ entry: await stat(who(c), req.path) }),
    makeDir: async (req: Req<{ path: string }>, c: HandlerContext) => {
      const w = who(c);
      const made = await call(async () => {
        const t = await at(w, req.path);
        return fs.mkdir(ctx, t.caller, t.envId, t.where);
      });
      if (!made.created) throw new ConnectError(`directory ${made.path} already exists`, Code.AlreadyExists);
      return { entry: await stat(w, req.path) };
    },
    move: async (req: Req<{ source: string; destination: string }>, c: HandlerContext) => {
      const w = who(c);
      await call(async () => {
        const t = await at(w, req.source);
        const to = resolvePath(req.destination, w.user);
        await fs.move(ctx, t.caller, t.envId, { service: t.service, from: t.where.path, to });
      });
      return { entry: await stat(w, req.destination) };
    },
    listDir: async (req: Req<{ path: string; depth: number }>, c: HandlerContext) =>
      call(async () => {
        const t = await at(who(c), req.path);
        const depth = String(Math.min(Math.max(req.depth || 1, 1), 16));
        const r = await fs.list(ctx, t.caller, t.envId, { ...t.where, depth });
        return { entries: r.entries.map(entryInfo) };
      }),
    remove: async (req: Req<{ path: string }>, c: HandlerContext) => {
      await call(async () => {
        const t = await at(who(c), req.path);
        await fs.remove(ctx, t.caller, t.envId, t.where);
      });
      return {};
    },
    watchDir: async function* (req: Req<{ path: string; recursive: boolean }>, c: HandlerContext) {
      const { dir, body } = await watch(who(c), req.path, req.recursive);
      const stop = () => body.destroy();
      // The client going, the deadline, or the sandbox ending ends the watch at once.
      const signal = callSignal(c);
      signal.addEventListener('abort', stop, { once: true });
      try {
        yield { event: { case: 'start' as const, value: {} } };
        for await (const e of lines(body)) {
          if (e.type === 'ping') yield { event: { case: 'keepalive' as const, value: {} } };
          else if (e.type === 'end') return;
          else {
            const ev = fsEvent(e, dir);
            if (ev) yield { event: { case: 'filesystem' as const, value: ev } };
          }
        }
      } finally {
        signal.removeEventListener('abort', stop);
        stop();
      }
    },
    createWatcher: async (req: Req<{ path: string; recursive: boolean }>, c: HandlerContext) => {
      const w = who(c);
      const mine = [...watchers.values()].filter((x) => x.sandbox === w.row.id).length;
      if (mine >= MAX_WATCHERS_PER_SANDBOX)
        throw new ConnectError(
          `at most ${MAX_WATCHERS_PER_SANDBOX} watchers per sandbox`,
          Code.ResourceExhausted,
        );
      const { dir, body } = await watch(w, req.path, req.recursive);
      const id = newId('w').toLowerCase();
      const watcher: Watcher = { sandbox: w.row.id, body, events: [], error: null };
      watchers.set(id, watcher);
      void (async () => {
        for await (const e of lines(body)) {
          if (e.type === 'end') break;
          const ev = e.type === 'ping' ? null : fsEvent(e, dir);
          if (!ev) continue;
          watcher.events.push(ev);
          if (watcher.events.length > MAX_WATCHER_EVENTS) watcher.events.shift();
        }
      })()
        .catch(() => {})
        .finally(() => {
          watcher.error ??= new ConnectError(`watcher ${id} ended`, Code.NotFound);
          // An ended watcher nobody reads is forgotten after a while.
          setTimeout(() => watchers.get(id) === watcher && watchers.delete(id), ENDED_KEPT_MS).unref();
        });
      return { watcherId: id };
    },
    getWatcherEvents: async (req: Req<{ watcherId: string }>, c: HandlerContext) => {
      const w = watchers.get(req.watcherId);
      if (!w || w.sandbox !== who(c).row.id)
        throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      const events = w.events.splice(0);
      if (!events.length && w.error) {
        watchers.delete(req.watcherId);
        throw w.error;
      }
      return { events };
    },
    removeWatcher: async (req: Req<{ watcherId: string }>, c: HandlerContext) => {
      const w = watchers.get(req.watcherId);
      if (!w || w.sandbox !== who(c).row.id)
        throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      watchers.delete(req.watcherId);
      w.body.destroy();
      return {};
    },
  };
  /** Ends every watcher (the control plane stops). */
  const close = () => {
    for (const w of watchers.values()) w.body.destroy();
    watchers.clear();
  };
  return { impl, close };
}
