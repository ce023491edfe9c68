// Where a sandbox's envd calls act, and as whom: its stack's agent service (`x-svc.agent.service`,
// else the first service), the user a call names, and paths as envd reads them (a relative one is
// under that user's home).
import { posix } from 'node:path';
import type { AppContext } from '../context.ts';
import * as envStore from '../envs/store.ts';
import { BadRequest, NotFound } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import type { E2bSandboxRow } from './store.ts';

export async function sandboxTarget(ctx: AppContext, row: E2bSandboxRow) {
  const caller: Caller = { teamId: row.team_id, role: 'e2b' };
  const env = await envStore.getEnv(ctx.db, row.team_id, row.env_id);
  const v = env?.CurrentVersionID
    ? await envStore.getVersion(ctx.db, row.team_id, env.CurrentVersionID)
    : undefined;
  if (!v) throw new NotFound(`sandbox ${row.id} has no running stack`);
  const service = v.Spec.agent?.service ?? v.Spec.services[0]?.name ?? '';
  return { caller, envId: row.env_id, service };
}

/** The user a call names (`username` query, or Basic auth with an empty password, as the SDK sends it). */
export function userOf(query: string | undefined, authorization: string | undefined): string {
  if (query) return query;
  if (!authorization?.startsWith('Basic ')) return '';
  const text = Buffer.from(authorization.slice(6), 'base64').toString('utf8');
  return text.endsWith(':') ? text.slice(0, -1) : '';
}

/** An absolute path in the container: a relative one (or `~/…`) is under the user's home. */
export function resolvePath(path: string, user: string): string {
  if (!path) throw new BadRequest('path is required');
  if (path.length > 4096 || path.includes('\0')) throw new BadRequest('path is too long or holds a NUL');
  const home = !user || user === 'root' ? '/root' : `/home/${user}`;
  const p = path === '~' ? home : path.startsWith('~/') ? `${home}/${path.slice(2)}` : path;
  return posix.normalize(p.startsWith('/') ? p : `${home}/${p}`);
}
