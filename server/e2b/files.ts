// envd's plain file routes over svc's file API (server/envs/fs.ts): `GET /files?path=` answers the
// raw bytes, `POST /files?path=` takes a multipart body (field `file`, one part per file, the part's
// filename its path when no `path` is given) or raw bytes, and answers `[{name, type, path}]`.
// Paths act in the sandbox's agent service; a relative one is under the user's home (target.ts).
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import type { AppContext } from '../context.ts';
import * as fs from '../envs/fs.ts';
import { BadRequest, TooLarge } from '../errors.ts';
import type { E2bSandboxRow } from './store.ts';
import { resolvePath, sandboxTarget } from './target.ts';

/** A multipart upload is held whole while its parts are split: at most this many bytes. */
export const MAX_MULTIPART_BYTES = 100 * 1024 * 1024;
const MAX_PARTS = 1000;
const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');

/** The multipart boundary of a content type, or null when it is not multipart/form-data. */
export function boundaryOf(contentType: string): string | null {
  const [type, ...params] = contentType.split(';');
  if (type.trim().toLowerCase() !== 'multipart/form-data') return null;
  for (const p of params) {
    const eq = p.indexOf('=');
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== 'boundary') continue;
    let b = p.slice(eq + 1).trim();
    if (b.startsWith('"') && b.endsWith('"') && b.length >= 2) b = b.slice(1, -1);
    if (b.length < 1 || b.length > 200)
      throw new BadRequest('multipart boundary must be 1 to 200 characters');
    return b;
  }
  throw new BadRequest('multipart/form-data without a boundary');
}

export interface Part {
  name: string;
  filename: string;
  data: Buffer;
}

/** `name="…"` of a Content-Disposition header (quotes as undici writes them: `"` is sent as %22). */
function param(header: string, key: string): string {
  const at = header.indexOf(`${key}="`);
  if (at < 0 || (at > 0 && header[at - 1] !== ' ' && header[at - 1] !== ';')) return '';
  const start = at + key.length + 2;
  const end = header.indexOf('"', start);
  if (end < 0) return '';
  return header.slice(start, end).replaceAll('%22', '"').replaceAll('%0D', '\r').replaceAll('%0A', '\n');
}

/** Splits a multipart/form-data body into its parts (linear scans; no regex on the body). */
export function parseMultipart(body: Buffer, boundary: string): Part[] {
  const delim = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = body.indexOf(delim);
  if (at < 0) throw new BadRequest('multipart body without its boundary');
  at += delim.length;
  const parts: Part[] = [];
  for (;;) {
    if (body[at] === 0x2d && body[at + 1] === 0x2d) return parts; // the closing `--`
    if (!body.subarray(at, at + 2).equals(CRLF)) throw new BadRequest('malformed multipart body');
    const headEnd = body.indexOf(HEADERS_END, at + 2);
    if (headEnd < 0) throw new BadRequest('malformed multipart body: a part without headers');
    const headers = body.subarray(at + 2, headEnd).toString('utf8');
    const dataStart = headEnd + 4;
    const dataEnd = body.indexOf(next, dataStart);
    if (dataEnd < 0) throw new BadRequest('malformed multipart body: a part without its end');
    let disposition = '';
    for (const line of headers.split('\r\n'))
      if (line.toLowerCase().startsWith('content-disposition:')) disposition = line.slice(20);
    parts.push({
      name: param(disposition, 'name'),
      filename: param(disposition, 'filename'),
      data: body.subarray(dataStart, dataEnd),
    });
    if (parts.length > MAX_PARTS) throw new BadRequest(`more than ${MAX_PARTS} parts`);
    at = dataEnd + next.length;
  }
}

/** Reads a body whole, refusing it (413) past `max` bytes without holding more. */
export async function readBounded(
  body: Readable,
  declared: number | undefined,
  max: number,
): Promise<Buffer> {
  if (declared !== undefined && declared > max)
    throw new TooLarge(`upload of ${declared} bytes is over the ${max}-byte limit`);
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of body) {
    n += (chunk as Buffer).length;
    if (n > max) throw new TooLarge(`upload over the ${max}-byte limit`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

export interface WriteInput {
  contentType: string;
  length: number | undefined;
  body: Readable;
  path: string | undefined;
  user: string;
}

/** Writes what a `POST /files` carries; answers envd's `[{name, type, path}]`. */
export async function writeFiles(ctx: AppContext, row: E2bSandboxRow, w: WriteInput) {
  const t = await sandboxTarget(ctx, row);
  const one = async (path: string, body: Readable, length: number | undefined) => {
    const abs = resolvePath(path, w.user);
    await fs.write(ctx, t.caller, t.envId, { service: t.service, path: abs }, body, length);
    return { name: posix.basename(abs), type: 'file' as const, path: abs };
  };
  const boundary = boundaryOf(w.contentType);
  if (!boundary) {
    if (!w.path) throw new BadRequest('path is required');
    return [await one(w.path, w.body, w.length)];
  }
  const max = Math.min(MAX_MULTIPART_BYTES, ctx.config.fsMaxFileBytes);
  const parts = parseMultipart(await readBounded(w.body, w.length, max), boundary).filter(
    (p) => p.name === 'file',
  );
  if (parts.length === 0) throw new BadRequest("multipart body without a 'file' field");
  const out = [];
  for (const p of parts) {
    const path = parts.length === 1 && w.path ? w.path : p.filename || w.path;
    if (!path) throw new BadRequest('a file part without a filename, and no path');
    out.push(await one(path, Readable.from([p.data]), p.data.length));
  }
  return out;
}

/** `GET /files`: the file's bytes and size. */
export async function readFile(ctx: AppContext, row: E2bSandboxRow, path: string, user: string) {
  const t = await sandboxTarget(ctx, row);
  return fs.read(ctx, t.caller, t.envId, { service: t.service, path: resolvePath(path, user) });
}
