// The file API: single-file operations in a service of an environment, each one `fs.*` command to
// the environment's host (protocol/fs.ts). Bytes never sit whole in memory here: a write's body is
// handed to the host as it arrives (a one-time blob it fetches), a read's bytes and a watch's
// events are the host's own PUT to a one-time blob, passed on to the client as they arrive.
// A host's typed refusal becomes the matching status (404 missing, 409 wrong type, 413 too large...).
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { CommandKind, Payloads, Results } from '../../protocol/commands.ts';
import { FS_LIMITS, FsEventSchema, type FsRefusal, type FsRefusalCode } from '../../protocol/fs.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import type { AppContext } from '../context.ts';
import { SvcError, TooLarge, Upstream } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { checkContainerPath, targetFor } from './io.ts';

const STATUS: Record<FsRefusalCode, number> = {
  not_found: 404,
  not_a_file: 409,
  not_a_dir: 409,
  is_a_dir: 409,
  too_large: 413,
  refused: 403,
  unsupported: 501,
  busy: 503,
};

/** How long a host has to start sending what it said it would send. */
const ARRIVAL_MS = 60_000;
/** A write lasts as long as its body takes to arrive (bounded by the body's idle timeout). */
const WRITE_TIMEOUT_MS = 4 * 3600_000;

function refused(r: { refusal?: FsRefusal }): void {
  if (r.refusal) throw new SvcError(STATUS[r.refusal.code] ?? 502, r.refusal.message);
}

interface Where {
  service: string;
  path: string;
}

/** Runs one fs command in the service's environment; a refusal is thrown as its status. */
async function run<K extends CommandKind & `fs.${string}`>(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  kind: K,
  payload: Payloads[K] & { service: string },
  timeoutMs?: number,
): Promise<Results[K]> {
  const { env, target } = await targetFor(ctx, caller, envId, payload.service);
  const r = await ctx.dispatcher.run(target, env.ID, kind, payload, timeoutMs);
  refused(r as { refusal?: FsRefusal });
  return r;
}

export async function stat(ctx: AppContext, caller: Caller, envId: string, q: Where) {
  checkContainerPath(q.path);
  const r = await run(ctx, caller, envId, 'fs.stat', q);
  if (!r.entry) throw new Upstream('the host answered the stat without an entry');
  return r.entry;
}

export async function list(ctx: AppContext, caller: Caller, envId: string, q: Where & { depth?: string }) {
  checkContainerPath(q.path);
  const r = await run(ctx, caller, envId, 'fs.list', {
    service: q.service,
    path: q.path,
    depth: q.depth === undefined ? 1 : Number(q.depth),
    limit: FS_LIMITS.maxListEntries,
  });
  return { entries: r.entries, truncated: r.truncated };
}

export async function mkdir(ctx: AppContext, caller: Caller, envId: string, q: Where) {
  checkContainerPath(q.path);
  const r = await run(ctx, caller, envId, 'fs.mkdir', q);
  return { path: q.path, created: r.created ?? true };
}

export async function move(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  b: { service: string; from: string; to: string },
) {
  checkContainerPath(b.from);
  checkContainerPath(b.to);
  await run(ctx, caller, envId, 'fs.move', b);
}

export async function remove(ctx: AppContext, caller: Caller, envId: string, q: Where) {
  checkContainerPath(q.path);
  await run(ctx, caller, envId, 'fs.remove', q);
}

/** Octal permission bits of a write; setuid, setgid and sticky are refused. */
export function writeMode(mode: string | undefined): number {
  if (mode === undefined) return 0o644;
  const bits = Number.parseInt(mode, 8);
  if (!/^[0-7]{3,4}$/.test(mode) || bits > 0o777)
    throw new SvcError(403, `mode ${mode.slice(0, 10)}: setuid, setgid and sticky bits are not accepted`);
  return bits;
}

export async function write(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  q: Where & { mode?: string },
  body: Readable,
  length: number | undefined,
) {
  checkContainerPath(q.path);
  const mode = writeMode(q.mode);
  const { env, target } = await targetFor(ctx, caller, envId, q.service);
  if (length === undefined)
    throw new SvcError(
      411,
      'send the file with a Content-Length (a chunked body has no size to check first)',
    );
  const max = ctx.config.fsMaxFileBytes;
  if (length > max)
    throw new TooLarge(`file of ${length} bytes is over the ${max}-byte limit (SVC_FS_MAX_FILE_BYTES)`);
  const blob = await ctx.blobs.offerStream(body, length);
  try {
    const payload = { service: q.service, path: q.path, blob, size: length, mode, max_bytes: max };
    const r = await ctx.dispatcher.run(target, env.ID, 'fs.write', payload, WRITE_TIMEOUT_MS);
    refused(r);
    return { path: q.path, size: r.size ?? length };
  } finally {
    ctx.blobs.drop(blob);
  }
}

/** Starts a command whose bytes the host PUTs to a one-time blob; the request once it arrives. */
async function streamed<K extends 'fs.read' | 'fs.watch'>(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  kind: K,
  payload: (upload: { url: string; token: string }) => Payloads[K] & { service: string },
): Promise<{ result: Results[K]; body: IncomingMessage }> {
  const up = await ctx.blobs.expectStream();
  try {
    const result = await run(ctx, caller, envId, kind, payload({ url: up.url, token: up.token }));
    const body = await withTimeout(
      up.arrived,
      ARRIVAL_MS,
      () => new Upstream(`the host did not start sending (${kind})`),
    );
    return { result, body };
  } finally {
    up.cancel();
  }
}

export async function read(ctx: AppContext, caller: Caller, envId: string, q: Where) {
  checkContainerPath(q.path);
  const max = ctx.config.fsMaxFileBytes;
  const { result, body } = await streamed(ctx, caller, envId, 'fs.read', (upload) => ({
    service: q.service,
    path: q.path,
    upload,
    max_bytes: max,
  }));
  const size = result.size ?? Number(body.headers['x-svc-size']);
  if (!Number.isSafeInteger(size) || size < 0) {
    body.destroy();
    throw new Upstream('the host sent a file without its size');
  }
  return { body, size };
}

export async function watch(ctx: AppContext, caller: Caller, envId: string, q: Where) {
  checkContainerPath(q.path);
  const { body } = await streamed(ctx, caller, envId, 'fs.watch', (upload) => ({
    service: q.service,
    path: q.path,
    upload,
  }));
  return body;
}

const EVENT = TypeCompiler.Compile(FsEventSchema);
const MAX_LINE = 64 * 1024;

/**
 * The host's JSON lines as Server-Sent Events: each checked event as one `data:` line, its
 * heartbeats as comment lines, and an `end` event when the host's stream stops without one.
 * Lines are bounded; the host's stream is paused while the client is slow and closed when it leaves.
 */
export function sseOf(lines: IncomingMessage): Readable {
  const out = new PassThrough();
  let buf = '';
  let ended = false;
  const finish = (reason: string) => {
    if (out.writableEnded) return;
    if (!ended) out.write(`data: ${JSON.stringify({ type: 'end', reason })}\n\n`);
    out.end();
    lines.destroy();
  };
  const emit = (line: string) => {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      return;
    }
    if ((v as { type?: unknown })?.type === 'ping') return void out.write(': ping\n\n');
    if (!EVENT.Check(v)) return;
    if (v.type === 'end') ended = true;
    if (!out.write(`data: ${JSON.stringify(v)}\n\n`)) {
      lines.pause();
      out.once('drain', () => lines.resume());
    }
  };
  lines.setEncoding('utf8');
  lines.on('data', (chunk: string) => {
    buf += chunk;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      emit(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
    }
    if (buf.length > MAX_LINE) finish('the host sent a line longer than 64 KiB');
  });
  lines.on('end', () => finish('the watch ended'));
  lines.on('error', () => finish('the host stopped sending'));
  lines.on('close', () => finish('the host stopped sending'));
  out.on('close', () => lines.destroy());
  return out;
}
