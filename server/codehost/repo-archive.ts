// The repository at a pushed commit as the deployment's project context (deploy from
// source ships the repository's files). GitHub's "download a repository archive (tar)",
// `GET /repos/{owner}/{repo}/tarball/{ref}`, answers 302 with a `Location` on codeload (a
// temporary URL that carries its own token for a private repository); that URL answers the
// tar.gz, whose entries sit under one top-level directory (`owner-repo-<short sha>/`). The
// archive is streamed to disk under the upload limit (512 MiB) and a deadline, the top-level
// directory is stripped, and the result is stored as an upload of the project's team.

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadable } from 'node:stream/web';
import { nameSuffix } from '../../protocol/ids.ts';
import type { UploadLimits } from '../config/config.ts';
import type { Db } from '../db/types.ts';
import { SvcError, TooLarge, Upstream } from '../errors.ts';
import { MAX_UPLOAD_BYTES, receive, stripTopDirectory } from '../uploads/archive.ts';
import { createUpload, type Upload } from '../uploads/uploads.ts';
import { CALL_TIMEOUT_MS, type GitHub, HttpFailure } from './github.ts';

/** The whole download (redirect answer, then the archive's bytes) ends within this. */
export const ARCHIVE_TIMEOUT_MS = 10 * 60_000;
const MiB = 1024 * 1024;

function headers(token?: string): Record<string, string> {
  const h: Record<string, string> = {
    accept: 'application/vnd.github+json',
    'user-agent': 'svc-control-plane',
    'x-github-api-version': '2022-11-28',
  };
  if (token) h.authorization = `Bearer ${token}`;
  return h;
}

async function get(url: string, signal: AbortSignal, token?: string): Promise<Response> {
  try {
    return await fetch(url, { headers: headers(token), redirect: 'manual', signal });
  } catch (err) {
    const e = err as Error;
    const why = e.name === 'TimeoutError' ? 'no answer in time' : e.message;
    throw new Upstream(`code host GET ${new URL(url).pathname}: ${why}`);
  }
}

async function failure(res: Response, url: string): Promise<HttpFailure> {
  const text = (await res.text().catch(() => '')).slice(0, 2000);
  let message = text.slice(0, 200) || res.statusText;
  try {
    message = (JSON.parse(text) as { message?: string }).message ?? message;
  } catch {}
  return new HttpFailure(res.status, `code host GET ${new URL(url).pathname}: ${res.status} ${message}`);
}

/** The archive's answer: the API's 302 followed once to its Location (never with our token). */
async function archiveResponse(gh: GitHub, installationId: number, repo: string, sha: string) {
  const signal = AbortSignal.timeout(ARCHIVE_TIMEOUT_MS);
  const token = await gh.installationToken(installationId);
  const api = `${gh.api}/repos/${repo}/tarball/${encodeURIComponent(sha)}`;
  let res = await get(api, AbortSignal.any([signal, AbortSignal.timeout(CALL_TIMEOUT_MS)]), token);
  if (res.status >= 300 && res.status < 400) {
    const location = res.headers.get('location') ?? '';
    await res.body?.cancel();
    let target: URL;
    try {
      target = new URL(location, api);
    } catch {
      throw new Upstream(`code host: the archive of ${repo} redirects to '${location.slice(0, 200)}'`);
    }
    if (target.protocol !== 'https:' && target.protocol !== 'http:')
      throw new Upstream(`code host: the archive of ${repo} redirects to a ${target.protocol} URL`);
    res = await get(target.toString(), signal);
    if (!res.ok) throw await failure(res, target.toString());
  } else if (!res.ok) throw await failure(res, api);
  if (!res.body) throw new Upstream(`code host: the archive of ${repo} at ${sha} is empty`);
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > MAX_UPLOAD_BYTES)
    throw new TooLarge(
      `the archive of ${repo} at ${sha} is ${Math.ceil(declared / MiB)} MiB; the limit is 512 MiB`,
    );
  return res.body;
}

/** Fetches `repo` at `sha` and stores it (top-level directory stripped) as an upload of `teamId`. */
export async function repositoryContext(
  db: Db,
  uploadsDir: string,
  gh: GitHub,
  c: { teamId: string; installationId: number; repo: string; sha: string },
  limits?: UploadLimits,
): Promise<Upload> {
  await mkdir(uploadsDir, { recursive: true, mode: 0o700 });
  const tmp = join(uploadsDir, `repo-${nameSuffix(16)}.download`);
  try {
    const body = await archiveResponse(gh, c.installationId, c.repo, c.sha);
    await receive(Readable.fromWeb(body as WebReadable), tmp, MAX_UPLOAD_BYTES).catch((err: Error) => {
      if (err instanceof TooLarge)
        throw new TooLarge(`the archive of ${c.repo} at ${c.sha} is larger than 512 MiB`);
      if (err instanceof SvcError) throw err;
      throw new Upstream(`code host: downloading the archive of ${c.repo} at ${c.sha}: ${err.message}`);
    });
    return await createUpload(db, uploadsDir, c.teamId, stripTopDirectory(tmp), { limits });
  } finally {
    await rm(tmp, { force: true });
  }
}
