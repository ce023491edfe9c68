// Who a service runs as, the way Docker decides it (spec "Isolation guarantees" 1; the
// parser once refused `0`, `00`, `root` but `-0` ran the agent as root). Docker reads the user part
// with Go's strconv.Atoi, so an optional sign and any number of zeros is uid 0; anything else that
// is not a number is a name looked up in the image's /etc/passwd. Used for the agent service before
// it starts (refuse uid 0 by any spelling or name), after it starts (its real uid, from the
// kernel), and for uploads (files are given to the service's own user).
import { readFile } from 'node:fs/promises';
import { extract } from 'tar-stream';
import type { DockerEngine } from './engine.ts';
import { DockerError } from './errors.ts';
import { sandboxProcesses } from './gvisor.ts';
import { GVISOR_DOCKER_RUNTIME } from './render.ts';

/** The uid Docker reads from a numeric user part, or null for a name. */
export function numericId(part: string): number | null {
  return /^[+-]?\d+$/.test(part) ? Number(part) : null;
}

export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
}

export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 4 || !f[0] || line.startsWith('#')) continue;
    const uid = numericId(f[2]);
    const gid = numericId(f[3]);
    if (uid !== null && gid !== null) out.push({ name: f[0], uid, gid });
  }
  return out;
}

async function fileOfTar(tar: Buffer): Promise<string> {
  const ex = extract();
  let text = '';
  const done = new Promise<void>((resolve, reject) => {
    ex.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => {
        if (header.type === 'file') chunks.push(c as Buffer);
      });
      stream.on('end', () => {
        if (header.type === 'file' && !text) text = Buffer.concat(chunks).toString('utf8');
        next();
      });
      stream.resume();
    });
    ex.on('finish', resolve);
    ex.on('error', reject);
  });
  ex.end(tar);
  await done;
  return text;
}

/** The image's /etc/passwd as the service's container sees it ('' when there is none). */
export async function passwdOf(engine: DockerEngine, service: string): Promise<PasswdEntry[]> {
  try {
    return parsePasswd(await fileOfTar(await engine.getArchive(service, '/etc/passwd', 1024 * 1024)));
  } catch (err) {
    if (/no such file|not found|404/i.test((err as Error).message)) return [];
    throw err;
  }
}

/**
 * uid and gid of a `user:` value inside the service's image. Empty is the image's default, root.
 * A group given by name (rare) falls back to the user's primary group.
 */
export async function resolveUser(engine: DockerEngine, service: string, user: string): Promise<PasswdEntry> {
  const [u = '', g = ''] = user.split(':');
  if (!u) return { name: 'root', uid: 0, gid: 0 };
  let uid = numericId(u);
  let gid = numericId(g);
  if (uid !== null && gid !== null) return { name: u, uid, gid };
  const passwd = await passwdOf(engine, service);
  const entry = uid === null ? passwd.find((e) => e.name === u) : passwd.find((e) => e.uid === uid);
  if (uid === null) {
    if (!entry) throw new DockerError(`service '${service}': user '${u}' is not in the image's /etc/passwd`);
    uid = entry.uid;
  }
  gid ??= entry?.gid ?? uid;
  return { name: u, uid, gid };
}

/** The agent message of the spec (`Errors` 3), naming how the user came out as root. */
const rootAgent = (service: string, how: string) =>
  new DockerError(
    `x-svc.agent.service '${service}' must set a non-root user (user: '<uid>:<gid>'); the agent is never root (${how})`,
  );

/** Before the agent starts: its user, by any spelling or a name in the image's /etc/passwd, is not uid 0. */
export async function refuseRootAgent(engine: DockerEngine, service: string, user: string): Promise<void> {
  const u = user.split(':')[0] ?? '';
  if (!u) throw rootAgent(service, 'no user set');
  if (numericId(u) === 0) throw rootAgent(service, `user '${user}' is uid 0`);
  const resolved = await resolveUser(engine, service, user);
  if (resolved.uid === 0) throw rootAgent(service, `user '${u}' is uid 0 in the image's /etc/passwd`);
}

/** After the agent started: the kernel's view of its main process; any uid 0 (real, effective, saved, fs) fails. */
export async function refuseRootProcess(engine: DockerEngine, service: string): Promise<number> {
  const info = await engine.inspect(service);
  const pid = info.State.Pid;
  if (!pid) throw new DockerError(`agent service '${service}' has no running process to check`);
  if (info.HostConfig.Runtime === GVISOR_DOCKER_RUNTIME) {
    // The host process is gVisor's sandbox (root on the host); the agent's own is in gVisor's kernel.
    const first = (await sandboxProcesses(pid, info.Id)).find((p) => p.pid === 1);
    if (!first) throw new DockerError(`agent service '${service}': gVisor lists no process 1`);
    if (first.uid === 0) throw rootAgent(service, 'its process runs as uid 0 (as gVisor sees it)');
    return first.uid;
  }
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const uids = (/^Uid:\s+(.*)$/m.exec(status)?.[1] ?? '').trim().split(/\s+/).map(Number);
  if (uids.length !== 4 || uids.some((x) => !Number.isInteger(x)))
    throw new DockerError(`agent service '${service}': cannot read the uid of process ${pid}`);
  if (uids.includes(0)) throw rootAgent(service, `its process runs as uid ${uids.join('/')}`);
  return uids[0];
}
