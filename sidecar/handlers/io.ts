// env.exec, env.put, env.get and host.report. Archives larger than a frame travel by one-time
// blob URLs on the control plane (the sidecar only ever dials out).
import { loadavg } from 'node:os';
import {
  type BlobRef,
  DEFAULT_EXEC_TIMEOUT_SEC,
  MAX_ARCHIVE_BYTES,
  type Results,
} from '../../protocol/commands.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { ExecTimeout } from '../docker/errors.ts';
import { rewriteUpload } from '../docker/upload.ts';
import { resolveUser } from '../docker/users.ts';
import type { CommandContext } from '../runner.ts';

/** Archives up to this size are returned inline; larger ones are uploaded (frames are 16 MiB). */
export const INLINE_ARCHIVE_BYTES = 8 * 1024 * 1024;
export const TIMEOUT_EXIT_CODE = 124;

export async function envExec(
  ctx: SidecarContext,
  cmd: CommandContext<'env.exec'>,
): Promise<Results['env.exec']> {
  const { service, cmd: argv, timeout_sec: timeoutSec = DEFAULT_EXEC_TIMEOUT_SEC } = cmd.payload;
  try {
    // The user's own command: it may take the container's spare exec (docker/spare.ts).
    const r = await engineOf(ctx, cmd.envId).exec(service, argv, { timeoutSec, spare: true });
    return { exit_code: r.exit_code, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    // Like timeout(1): the command ran, so its partial output comes back with exit code 124.
    if (err instanceof ExecTimeout) {
      const note = err.killed
        ? `svc: command timed out after ${timeoutSec} s and was killed`
        : `svc: command timed out after ${timeoutSec} s; ${err.kill}`;
      return {
        exit_code: TIMEOUT_EXIT_CODE,
        stdout: err.stdout ?? '',
        stderr: `${err.stderr ?? ''}${err.stderr ? '\n' : ''}${note}`,
      };
    }
    throw err;
  }
}

async function download(blob: BlobRef): Promise<Buffer> {
  const r = await fetch(blob.url, {
    headers: { authorization: `Bearer ${blob.token}` },
    signal: AbortSignal.timeout(120_000),
  });
  if (!r.ok) throw new Error(`fetching the archive from the control plane: HTTP ${r.status}`);
  const data = Buffer.from(await r.arrayBuffer());
  if (data.length > MAX_ARCHIVE_BYTES) throw new Error('archive larger than 32 MiB');
  return data;
}

export async function envPut(
  ctx: SidecarContext,
  cmd: CommandContext<'env.put'>,
): Promise<Results['env.put']> {
  const { service, path, blob } = cmd.payload;
  const data = blob ? await download(blob) : Buffer.from(cmd.payload.tar_b64, 'base64');
  if (data.length > MAX_ARCHIVE_BYTES) throw new Error('archive larger than 32 MiB');
  const engine = engineOf(ctx, cmd.envId);
  // Extracted as the service's own user (its container's user, resolved in the image's /etc/passwd).
  const owner = await resolveUser(engine, service, (await engine.inspect(service)).Config.User ?? '');
  await engine.putArchive(service, path, await rewriteUpload(data, owner), owner);
  return { path };
}

export async function envGet(
  ctx: SidecarContext,
  cmd: CommandContext<'env.get'>,
): Promise<Results['env.get']> {
  const { service, path, upload } = cmd.payload;
  const data = await engineOf(ctx, cmd.envId).getArchive(service, path, MAX_ARCHIVE_BYTES);
  if (data.length <= INLINE_ARCHIVE_BYTES || !upload) {
    if (data.length > INLINE_ARCHIVE_BYTES)
      throw new Error('archive too large to return inline and no upload URL given');
    return { tar_b64: data.toString('base64') };
  }
  const r = await fetch(upload.url, {
    method: 'PUT',
    headers: { authorization: `Bearer ${upload.token}`, 'content-type': 'application/octet-stream' },
    body: data,
    signal: AbortSignal.timeout(120_000),
  });
  if (!r.ok) throw new Error(`uploading the archive to the control plane: HTTP ${r.status}`);
  return { tar_b64: '', uploaded: true, bytes: data.length };
}

export async function hostReport(
  _ctx: SidecarContext,
  _cmd: CommandContext<'host.report'>,
  caps: () => Promise<Results['host.report']['capabilities']>,
) {
  // The spec's shape; the control plane keeps its own list of a host's environments.
  return { capabilities: await caps(), environments: [], load_avg: loadavg() };
}
