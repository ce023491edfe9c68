// Single-file operations in a service's container (the `fs.*` command kinds): their payloads,
// results, the entry and watch-event records the HTTP API answers with, and their bounds. Bytes
// never travel in a frame: a read is PUT by the sidecar to a one-time blob URL and a write is
// fetched from one, both streamed; a watch's events are PUT the same way, one JSON object a line.
import { type Static, Type } from '@sinclair/typebox';
import { BlobRefSchema } from './blob.ts';

const Str = Type.String();
const Int = Type.Integer({ minimum: 0 });

export const FS_LIMITS = {
  /** Largest file a read or write moves; SVC_FS_MAX_FILE_BYTES on the control plane lowers or raises it. */
  maxFileBytes: 1024 * 1024 * 1024,
  /** A list answers at most this many entries (`truncated: true` past it). */
  maxListEntries: 10_000,
  maxDepth: 16,
  /** A watch looks at its directory (depth 1) this often, and at most this many entries of it. */
  watchPollMs: 1000,
  watchMaxEntries: 10_000,
  /** Events sent per poll; the rest are counted in one `gap` event. */
  watchMaxEvents: 256,
  /** A line (`{"type":"ping"}`) this often while nothing happens, so a quiet watch is not cut as stalled. */
  watchHeartbeatMs: 15_000,
  watchesPerEnv: 8,
  watchesPerHost: 64,
} as const;

export const FS_ENTRY_TYPES = ['file', 'dir', 'symlink', 'other'] as const;

/** One file system entry, as stat and list answer it (`other`: a FIFO, socket or device node). */
export const FsEntrySchema = Type.Object({
  name: Type.String({ description: 'Base name' }),
  path: Type.String({ description: 'Absolute path inside the container' }),
  type: Type.Union(FS_ENTRY_TYPES.map((t) => Type.Literal(t))),
  size: Type.Integer({ description: 'Bytes (a symlink: the length of its target)' }),
  mode: Type.Integer({ description: 'Permission bits with setuid/setgid/sticky (e.g. 420 = 0644)' }),
  mtime: Type.String({ description: 'Last modification, ISO 8601' }),
});
export type FsEntry = Static<typeof FsEntrySchema>;

export const FS_REFUSALS = [
  'not_found',
  'not_a_file',
  'not_a_dir',
  'is_a_dir',
  'too_large',
  'refused',
  'unsupported',
  'busy',
] as const;
export type FsRefusalCode = (typeof FS_REFUSALS)[number];

/** Why the host did not do an operation: the control plane answers it as a 4xx/5xx (server/envs/fs.ts). */
export const FsRefusalSchema = Type.Object({
  code: Type.Union(FS_REFUSALS.map((c) => Type.Literal(c))),
  message: Str,
});
export type FsRefusal = Static<typeof FsRefusalSchema>;

export const FS_EVENT_TYPES = ['create', 'write', 'remove', 'rename', 'gap', 'end'] as const;

/**
 * One watch event (an SSE `data:` line). `rename` has `from`; `gap` counts the events dropped by
 * the bounds (`dropped`) or says the directory had more entries than a watch looks at (`reason`);
 * `end` is the last event when the watch stops on the host's side (container gone, path removed).
 */
export const FsEventSchema = Type.Object({
  type: Type.Union(FS_EVENT_TYPES.map((t) => Type.Literal(t))),
  path: Type.Optional(Str),
  from: Type.Optional(Str),
  dropped: Type.Optional(Int),
  reason: Type.Optional(Str),
});
export type FsEvent = Static<typeof FsEventSchema>;

const Target = { service: Str, path: Str };
const Refusal = { refusal: Type.Optional(FsRefusalSchema) };

export const FS_PAYLOADS = {
  'fs.stat': Type.Object(Target),
  'fs.list': Type.Object({
    ...Target,
    depth: Type.Integer({ minimum: 1, maximum: FS_LIMITS.maxDepth, default: 1 }),
    limit: Type.Integer({ minimum: 1, maximum: FS_LIMITS.maxListEntries, default: FS_LIMITS.maxListEntries }),
  }),
  'fs.mkdir': Type.Object(Target),
  'fs.move': Type.Object({ service: Str, from: Str, to: Str }),
  /** Recursive for a directory. */
  'fs.remove': Type.Object(Target),
  /** The file's bytes are PUT to `upload`, streamed, after the result told their size. */
  'fs.read': Type.Object({ ...Target, upload: BlobRefSchema, max_bytes: Int }),
  /** `size` bytes are fetched from `blob`, streamed into a temporary file beside `path`, then renamed over it. */
  'fs.write': Type.Object({
    ...Target,
    blob: BlobRefSchema,
    size: Int,
    mode: Type.Integer({ minimum: 0, maximum: 0o777, default: 0o644 }),
    max_bytes: Int,
  }),
  /** Events are PUT to `upload` as JSON lines until that request is closed. */
  'fs.watch': Type.Object({ ...Target, upload: BlobRefSchema }),
};

export const FS_RESULTS = {
  'fs.stat': Type.Object({ ...Refusal, entry: Type.Optional(FsEntrySchema) }),
  'fs.list': Type.Object({
    ...Refusal,
    entries: Type.Array(FsEntrySchema),
    truncated: Type.Boolean(),
  }),
  'fs.mkdir': Type.Object({ ...Refusal, created: Type.Optional(Type.Boolean()) }),
  'fs.move': Type.Object(Refusal),
  'fs.remove': Type.Object(Refusal),
  'fs.read': Type.Object({ ...Refusal, size: Type.Optional(Int) }),
  'fs.write': Type.Object({ ...Refusal, size: Type.Optional(Int) }),
  'fs.watch': Type.Object(Refusal),
};
