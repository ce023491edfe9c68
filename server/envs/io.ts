// Exec and file transfer: direct commands to an environment's host, recorded in the commands
// table like every other command. A host that cannot run them is a 502 carrying its reason (a
// 504 when it did not answer in time: the command's failure type chooses, server/errors.ts).

import tar from 'tar-stream';
import type { ExecRequestBody } from '../../protocol/api/bodies.ts';
import { DEFAULT_EXEC_TIMEOUT_SEC, MAX_ARCHIVE_BYTES } from '../../protocol/commands.ts';
import {
  expandedSize,
  expandedTooLarge,
  MAX_UPLOAD_EXPANDED_BYTES,
  uploadRefusal,
} from '../../protocol/uploads.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import type { AppContext } from '../context.ts';
import { BadRequest, Conflict, NotFound, TooLarge, Upstream } from '../errors.ts';
import { INLINE_ARCHIVE_BYTES } from '../hosts/blobs.ts';
import { HostUnavailable } from '../hosts/command-target.ts';
import type { Caller } from '../identity/auth.ts';
import { assertLive } from './lifecycle.ts';
import { getEnvHot, getVersion } from './store.ts';

export const EXEC_GRACE_SEC = 10;
export { MAX_EXEC_TIMEOUT_SEC } from '../../protocol/api/bodies.ts';
/** How many versions' service names the context keeps before it drops them all. */
export const VERSION_SERVICES_MAX = 10_000;

/** Service names by version id, kept in the context's `versionServices` (see its comment). */
async function versionServices(ctx: AppContext, teamId: string, versionId: string): Promise<string[] | null> {
  const names = await ctx.versionServices.get(versionId, async () =>
    (await getVersion(ctx.db, teamId, versionId))?.Spec.services.map((s) => s.name),
  );
  return names ?? null;
}

/** The caller's live environment and its host; with `service`, one the environment has (400 otherwise). */
export async function targetFor(ctx: AppContext, caller: Caller, envId: string, service?: string) {
  const env = await getEnvHot(ctx.db, caller.teamId, envId);
  if (!env) throw new NotFound(`environment ${envId} not found`);
  assertLive(env);
  if (!env.HostID || !env.CurrentVersionID)
    throw new Conflict(`environment ${env.ID} has no running stack yet`);
  const services = await versionServices(ctx, caller.teamId, env.CurrentVersionID);
  if (service !== undefined && services && !services.includes(service)) {
    throw new BadRequest(
      `environment ${env.ID} has no service '${service}' (services: ${services.join(', ')})`,
    );
  }
  try {
    return { env, target: await ctx.targets.of(caller.teamId, env.HostID) };
  } catch (err) {
    if (err instanceof HostUnavailable) throw new Upstream(err.message);
    throw err;
  }
}

export async function exec(ctx: AppContext, caller: Caller, envId: string, body: ExecRequestBody) {
  const timeout = body.timeout_sec ?? DEFAULT_EXEC_TIMEOUT_SEC;
  const { env, target } = await targetFor(ctx, caller, envId, body.service);
  // A failed command is a CommandError, whose HTTP status follows its type (server/errors.ts).
  return ctx.dispatcher.run(
    target,
    env.ID,
    'env.exec',
    { service: body.service, cmd: body.cmd, timeout_sec: timeout },
    (timeout + EXEC_GRACE_SEC) * 1000,
  );
}

/**
 * Reads the archive's headers, so a body that is not a tar, an entry the host would refuse
 * (devices, FIFOs) or an archive expanding past the limit is a 4xx before any host sees it.
 */
async function checkTar(data: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const ex = tar.extract();
    let entries = 0;
    let expanded = 0;
    let refused: Error | null = null;
    const refuse = (err: Error) => reject(new BadRequest(`body is not a valid tar archive: ${err.message}`));
    ex.on('entry', (h, stream, next) => {
      entries++;
      const refusal = uploadRefusal(h);
      expanded += expandedSize(h);
      if (refusal) refused ??= new BadRequest(`upload refused: ${refusal}`);
      else if (expanded > MAX_UPLOAD_EXPANDED_BYTES) refused ??= new TooLarge(expandedTooLarge(expanded));
      // tar-stream never ends the stream of a directory that declares a size (a hung request
      // found by the tar fuzz); a directory has no content, so go on at once.
      if (h.type === 'directory') {
        stream.resume();
        return next();
      }
      stream.on('end', next);
      // A truncated entry errors here too; unheard, that error would end the process (fuzzing hit it).
      stream.on('error', refuse);
      stream.resume();
    });
    ex.on('finish', () => (refused ? reject(refused) : resolve(entries)));
    ex.on('error', refuse);
    ex.end(data);
  });
}

export function checkContainerPath(path: string): void {
  if (!path.startsWith('/') || path.split('/').includes('..') || path.includes('\0') || path.length > 4096) {
    throw new BadRequest(
      `path '${path.slice(0, 100)}' must be an absolute path inside the container without '..'`,
    );
  }
}

export async function putFiles(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  service: string,
  path: string,
  data: Buffer,
) {
  checkContainerPath(path);
  if (data.length > MAX_ARCHIVE_BYTES) throw new TooLarge('archive larger than 32 MiB');
  if ((await checkTar(data)) === 0) throw new BadRequest('tar archive is empty');
  const { env, target } = await targetFor(ctx, caller, envId, service);
  const inline = data.length <= INLINE_ARCHIVE_BYTES;
  const payload = inline
    ? { service, path, tar_b64: data.toString('base64') }
    : { service, path, tar_b64: '', blob: await ctx.blobs.offer(data) };
  await ctx.dispatcher.run(target, env.ID, 'env.put', payload);
  return { ok: true as const, bytes: data.length };
}

export async function getFiles(
  ctx: AppContext,
  caller: Caller,
  envId: string,
  service: string,
  path: string,
): Promise<Buffer> {
  checkContainerPath(path);
  const { env, target } = await targetFor(ctx, caller, envId, service);
  const upload = await ctx.blobs.expect();
  const r = await ctx.dispatcher.run(target, env.ID, 'env.get', {
    service,
    path,
    upload: { url: upload.url, token: upload.token },
  });
  const data = r.uploaded
    ? await withTimeout(
        upload.received,
        60_000,
        () => new Upstream('host said it uploaded the archive but it never arrived'),
      )
    : Buffer.from(r.tar_b64, 'base64');
  if (data.length > MAX_ARCHIVE_BYTES) throw new Upstream('archive larger than 32 MiB');
  return data;
}
