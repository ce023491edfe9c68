// PUT /v1/uploads: a project context (raw tar or tar.gz, at most 512 MiB) streamed to disk under
// `<uploads dir>/<id>.tar` with its index `<id>.json`; the row ties it to the team. A deploy names
// it by id; its version records the digest, and the bytes stay for forks, rollbacks and redeploys.
// Bytes the team has uploaded before answer with that upload (marked used, so it is not collected).
// A team keeps at most its quota (Config.uploads: bytes and count, each content once); 413 past it.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { newId } from '../../protocol/ids.ts';
import type { ContextRef } from '../../protocol/spec.ts';
import { type ContextEntry, MAX_READ_BYTES, type ProjectContext } from '../compose/context.ts';
import { DEFAULT_UPLOAD_LIMITS, type UploadLimits } from '../config/config.ts';
import type { Db } from '../db/types.ts';
import { BadRequest, NotFound, TooLarge } from '../errors.ts';
import { entryPath, indexArchive, mib, readFiles, receive } from './archive.ts';
import {
  insertUpload,
  lockTeamUploads,
  reuseUpload,
  type TeamUploads,
  teamUploads,
  useUpload,
} from './store.ts';

export const UPLOAD_PREFIX = 'upl_';
const ID = /^upl_[0-9a-z]{22}$/;

export interface Upload {
  upload: string;
  sha256: string;
  bytes: number;
}

export const archivePath = (dir: string, id: string) => join(dir, `${id}.tar`);
export const indexPath = (dir: string, id: string) => join(dir, `${id}.json`);
const onDisk = (dir: string, id: string) =>
  existsSync(archivePath(dir, id)) && existsSync(indexPath(dir, id));

/**
 * The most bytes an upload of the team may have before its digest is known: what the quota
 * leaves, or as much as its largest upload (the same bytes again are kept once and cost nothing).
 */
function room(kept: TeamUploads, limits: UploadLimits): number {
  const bytesLeft = limits.quotaBytes > 0 ? limits.quotaBytes - kept.bytes : Number.POSITIVE_INFINITY;
  const fresh = limits.quotaCount > 0 && kept.count >= limits.quotaCount ? 0 : bytesLeft;
  return Math.min(limits.maxBytes, Math.max(fresh, kept.largest));
}

/** 413 when one more upload of `bytes` would pass the team's quota. */
function checkQuota(kept: TeamUploads, bytes: number, limits: UploadLimits): void {
  const passed = [
    limits.quotaBytes > 0 && kept.bytes + bytes > limits.quotaBytes ? mib(limits.quotaBytes) : '',
    limits.quotaCount > 0 && kept.count + 1 > limits.quotaCount ? `${limits.quotaCount} uploads` : '',
  ].filter(Boolean);
  if (passed.length === 0) return;
  throw new TooLarge(
    `upload quota: the team keeps ${kept.count} uploads of ${mib(kept.bytes)}` +
      `${bytes > 0 ? `, and ${mib(bytes)} more` : ''} would pass its quota of ${passed.join(' and ')}; ` +
      'uploads no live environment uses are deleted after SVC_UPLOADS_GRACE',
  );
}

export interface UploadOptions {
  limits?: UploadLimits;
  /** The request's Content-Length, when it has one. */
  declared?: number;
  /** Whether the request's body arrived to its end (read once the stream has ended). */
  complete?: () => boolean;
}

/**
 * Streams `body` to disk, checks it, and keeps it for the team. Refused (413) before a byte is
 * read when `declared` (the Content-Length) is past the limit or the quota, and while reading
 * when the bytes pass them; the quota is checked again with the digest, the team's row locked,
 * so two uploads racing cannot both fit where one does.
 */
export async function createUpload(
  db: Db,
  dir: string,
  teamId: string,
  body: Readable,
  opts: UploadOptions = {},
): Promise<Upload> {
  const { limits = DEFAULT_UPLOAD_LIMITS, declared } = opts;
  if (declared !== undefined && declared > limits.maxBytes)
    throw new TooLarge(`upload larger than ${mib(limits.maxBytes)}`);
  const kept = await teamUploads(db, teamId);
  const most = room(kept, limits);
  if (declared !== undefined && declared > most) checkQuota(kept, declared, limits);
  if (most <= 0) checkQuota(kept, 0, limits);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const id = newId(UPLOAD_PREFIX);
  const tmp = join(dir, `${id}.part`);
  let keptId: string | undefined;
  try {
    const { sha256, bytes } = await receive(body, tmp, most).catch((err) => {
      if (err instanceof TooLarge && most < limits.maxBytes) checkQuota(kept, most + 1, limits);
      throw err;
    });
    // Checked, not assumed: a body short of its declared length, or one that did not arrive to
    // its end, is not what was sent.
    if ((declared !== undefined && bytes !== declared) || opts.complete?.() === false)
      throw new BadRequest(`the upload was cut off after ${bytes} bytes`);
    // The same bytes again (a redeploy of an unchanged directory, a repeated push): one copy.
    const same = await reuseUpload(db, teamId, sha256);
    if (same && onDisk(dir, same)) return { upload: same, sha256, bytes };
    const entries = await indexArchive(tmp, limits);
    await writeFile(indexPath(dir, id), JSON.stringify([...entries]));
    await rename(tmp, archivePath(dir, id));
    keptId = await db.transaction(async (tx) => {
      await lockTeamUploads(tx, teamId);
      const again = await reuseUpload(tx, teamId, sha256);
      if (again && onDisk(dir, again)) return again;
      checkQuota(await teamUploads(tx, teamId), bytes, limits);
      await insertUpload(tx, id, teamId, sha256, bytes);
      return id;
    });
    return { upload: keptId, sha256, bytes };
  } finally {
    await rm(tmp, { force: true });
    if (keptId !== id) {
      await rm(archivePath(dir, id), { force: true });
      await rm(indexPath(dir, id), { force: true });
    }
  }
}

/** The team's upload, or 404 / 400 for a malformed id. */
export async function findUpload(db: Db, teamId: string, id: string): Promise<Upload> {
  if (!ID.test(id)) throw new BadRequest(`context '${id.slice(0, 80)}' is not an upload id (upl_…)`);
  const row = await useUpload(db, teamId, id);
  if (!row) throw new NotFound(`upload ${id} not found`);
  return { upload: row.id, sha256: row.sha256, bytes: row.bytes };
}

/** The parser's view of an upload: its index and the text of `wanted` files; `base` is the compose file's directory. */
export async function projectContext(
  dir: string,
  up: Upload,
  wanted: Set<string>,
  base = '',
): Promise<ProjectContext> {
  let list: [string, ContextEntry][];
  try {
    list = JSON.parse(await readFile(indexPath(dir, up.upload), 'utf8'));
  } catch {
    throw new NotFound(`upload ${up.upload} is no longer on this server; upload the context again`);
  }
  const entries = new Map(list);
  const files = await readFiles(archivePath(dir, up.upload), wanted, MAX_READ_BYTES);
  if (base !== '' && entries.get(base)?.kind !== 'dir')
    throw new BadRequest(`compose_path: the directory '${base}' is not in the context ${up.upload}`);
  return { sha256: up.sha256, base, entries, files, wanted: new Set() };
}

/**
 * `compose_path` of a deploy: where the compose file sits inside the context (`docker/compose.yaml`),
 * normalised; its directory is where relative paths start. Absolute or climbing paths are refused.
 */
export function composeBase(composePath: string | undefined): { path: string; base: string } {
  if (composePath === undefined || composePath === '') return { path: '', base: '' };
  const path = entryPath(composePath);
  if (path === null || path === '' || composePath.length > 4096)
    throw new BadRequest(
      `compose_path '${composePath.slice(0, 200)}' must be a file path inside the context (relative, without '..')`,
    );
  const cut = path.lastIndexOf('/');
  return { path, base: cut < 0 ? '' : path.slice(0, cut) };
}

export const contextRef = (up: Upload, composePath = ''): ContextRef => ({
  upload: up.upload,
  sha256: up.sha256,
  bytes: up.bytes,
  ...(composePath ? { compose_path: composePath } : {}),
});
