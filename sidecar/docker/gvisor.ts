// gVisor as a runtime: svcd finds `runsc`, makes sure the Docker daemon knows it as the runtime
// `runsc` (adding it to the daemon's configuration file and reloading the daemon with SIGHUP,
// which re-reads `runtimes` without touching running containers), and says what it found in its
// capabilities. An environment asks for gvisor in its spec; a host without it refuses that spec.
//
// The network mode: the runsc Debian ships (2022) decides it runs in the host's network namespace
// when `/proc/sys/net/core/rmem_default` exists, which newer kernels have in every namespace, so
// its own network stack (`--network=sandbox`) refuses to start under Docker there. svcd registers
// runsc with `--network=host` unless SVC_GVISOR_NETWORK=sandbox: the sandbox then uses the
// container's own network namespace (Docker's veth on the stack's bridge, so svc's firewall rules
// and the egress probe apply as under runc), through the host kernel's network stack.
//
// The root file system: runsc's default (`--file-access=exclusive`) lets gVisor assume nothing else
// changes the container's root, so a file the engine writes there (the file API, uploads) stayed
// invisible inside where gVisor had looked before (`/etc`), and the engine could read what gVisor
// had not written back. svcd registers runsc with `--file-access=shared`, as volumes already are:
// gVisor revalidates what it cached. An entry an earlier svcd wrote without it is brought up to date.
import { execFile } from 'node:child_process';
import { access, constants, readFile, readlink, rename, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import type Docker from 'dockerode';
import type { Runtime } from '../../protocol/spec.ts';
import { sleep } from '../../shared/concurrency.ts';
import type { DockerEngine } from './engine.ts';
import { GVISOR_DOCKER_RUNTIME } from './render.ts';

export interface GvisorInfo {
  /** runsc's version line (`0.0~20221219.0`). */
  version: string;
  /** The platform runsc intercepts system calls with (ptrace, kvm, systrap). */
  platform: string;
  /** Its network mode: host (the container's namespace, the host kernel's stack) or sandbox (gVisor's own). */
  network: string;
}

export interface HostRuntimes {
  /** Null without runsc registered with Docker; `problem` says why. */
  gvisor: GvisorInfo | null;
  default: Runtime;
  problem?: string;
}

export const DAEMON_JSON = '/etc/docker/daemon.json';
const RELOAD_WAIT_MS = 10_000;

const run = (file: string, args: string[]) =>
  new Promise<string>((resolve, reject) =>
    execFile(file, args, { timeout: 10_000, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(err) : resolve(`${stdout}${stderr}`),
    ),
  );

/** runsc on PATH (or SVC_RUNSC), or null. */
export async function findRunsc(env = process.env): Promise<string | null> {
  const candidates = env.SVC_RUNSC
    ? [env.SVC_RUNSC]
    : (env.PATH ?? '').split(delimiter).map((dir) => join(dir || '.', 'runsc'));
  for (const path of candidates) {
    if (!path.startsWith('/')) continue;
    if (
      await access(path, constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return path;
  }
  return null;
}

/** The `--flag=value` of runtime arguments, or the fallback. */
function argValue(args: string[], flag: string, fallback: string): string {
  const found = args.find((a) => a.startsWith(`--${flag}=`) || a.startsWith(`-${flag}=`));
  return found ? found.slice(found.indexOf('=') + 1) : fallback;
}

const SHARED_ROOT = '--file-access=shared';

/** An entry an earlier svcd wrote: this one's path and arguments, without the shared root. */
function earlierEntry(found: unknown, entry: { path: string; runtimeArgs: string[] }): boolean {
  const f = found as { path?: unknown; runtimeArgs?: unknown } | null;
  const args = entry.runtimeArgs.filter((a) => a !== SHARED_ROOT);
  return (
    f?.path === entry.path &&
    Array.isArray(f.runtimeArgs) &&
    f.runtimeArgs.length === args.length &&
    args.every((a, i) => (f.runtimeArgs as unknown[])[i] === a)
  );
}

/** The runtime entry svcd adds: runsc with the network mode (and platform) the environment asks for. */
export function runscEntry(path: string, env = process.env): { path: string; runtimeArgs: string[] } {
  const network = env.SVC_GVISOR_NETWORK || 'host';
  if (network !== 'host' && network !== 'sandbox')
    throw new Error(`SVC_GVISOR_NETWORK: '${network}' must be host or sandbox`);
  const args = [`--network=${network}`, SHARED_ROOT];
  if (env.SVC_GVISOR_PLATFORM) args.push(`--platform=${env.SVC_GVISOR_PLATFORM}`);
  return { path, runtimeArgs: args };
}

/**
 * The daemon configuration with runsc added under `runtimes` (or an earlier svcd's entry brought up
 * to date), every other key as it was. Null when the text already names another `runsc` runtime
 * (the operator's, used as it is) or this one. Throws on a file that is not a JSON object.
 */
export function withRunsc(
  text: string | null,
  entry: { path: string; runtimeArgs: string[] },
): string | null {
  const trimmed = (text ?? '').trim();
  const parsed: unknown = trimmed === '' ? {} : JSON.parse(trimmed);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error('the Docker daemon configuration is not a JSON object');
  const conf = parsed as Record<string, unknown>;
  const runtimes = conf.runtimes ?? {};
  if (typeof runtimes !== 'object' || runtimes === null || Array.isArray(runtimes))
    throw new Error("the Docker daemon configuration's runtimes is not an object");
  const found = (runtimes as Record<string, unknown>)[GVISOR_DOCKER_RUNTIME];
  if (found !== undefined && !earlierEntry(found, entry)) return null;
  conf.runtimes = { ...runtimes, [GVISOR_DOCKER_RUNTIME]: entry };
  return `${JSON.stringify(conf, null, 2)}\n`;
}

type RuntimeInfo = { path?: string; runtimeArgs?: string[] };
async function registered(docker: Docker): Promise<RuntimeInfo | null> {
  const info = (await docker.info()) as { Runtimes?: Record<string, RuntimeInfo> };
  return info.Runtimes?.[GVISOR_DOCKER_RUNTIME] ?? null;
}

/** The pid of the daemon that reads daemon.json: its pid file (SVC_DOCKERD_PIDFILE). */
async function dockerdPid(env = process.env): Promise<number> {
  const text = await readFile(env.SVC_DOCKERD_PIDFILE || '/var/run/docker.pid', 'utf8');
  const pid = Number(text.trim());
  if (!Number.isSafeInteger(pid) || pid <= 1)
    throw new Error(`no dockerd pid in its pid file ('${text.trim()}')`);
  return pid;
}

/** Adds runsc to the daemon's configuration and reloads it (SIGHUP), then waits until Docker lists it. */
async function register(docker: Docker, path: string, log: (m: string) => void, env = process.env) {
  const file = env.SVC_DOCKER_DAEMON_JSON || DAEMON_JSON;
  const before = await readFile(file, 'utf8').catch((err) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  });
  const next = withRunsc(before, runscEntry(path, env));
  if (next !== null) {
    const tmp = `${file}.svcd-tmp`;
    await writeFile(tmp, next, { mode: 0o644 });
    await rename(tmp, file);
    log(`added the runsc runtime (${path}) to ${file}`);
  }
  process.kill(await dockerdPid(env), 'SIGHUP');
  const deadline = Date.now() + RELOAD_WAIT_MS;
  while (Date.now() < deadline) {
    const found = await registered(docker);
    if (found && !earlierEntry(found, runscEntry(path, env))) return found;
    await sleep(200);
  }
  throw new Error(
    `the Docker daemon did not list runsc after reloading ${file} (is that the file it reads?)`,
  );
}

/** What this host can run: runc always; gvisor once runsc is found and registered with Docker. */
export async function setUpRuntimes(
  docker: Docker,
  log: (m: string) => void,
  env = process.env,
): Promise<HostRuntimes> {
  const wanted = env.SVC_RUNTIME || 'runc';
  if (wanted !== 'runc' && wanted !== 'gvisor')
    throw new Error(`SVC_RUNTIME: '${wanted}' must be runc or gvisor`);
  const base = { default: wanted as Runtime };
  const path = await findRunsc(env);
  if (!path) return { ...base, gvisor: null, problem: 'runsc is not installed (apt-get install runsc)' };
  try {
    const found = await registered(docker);
    const entry =
      found && !earlierEntry(found, runscEntry(path, env)) ? found : await register(docker, path, log, env);
    const args = entry.runtimeArgs ?? [];
    const version =
      /runsc version (\S+)/.exec(await run(entry.path || path, ['--version']))?.[1] ?? 'unknown';
    const flags = await run(entry.path || path, ['flags']).catch(() => '');
    const platformDefault =
      /specifies which platform to use:[^\n]*\(default "(\w+)"\)/.exec(flags)?.[1] ?? 'ptrace';
    const gvisor = {
      version,
      platform: argValue(args, 'platform', platformDefault),
      network: argValue(args, 'network', 'sandbox'),
    };
    return { ...base, gvisor };
  } catch (err) {
    return { ...base, gvisor: null, problem: `gVisor is not available: ${(err as Error).message}` };
  }
}

/** The capabilities' runtime fields. */
export function runtimeCapabilities(r: HostRuntimes | undefined) {
  if (!r) return { runtimes: ['runc'], default_runtime: 'runc' };
  return {
    runtimes: r.gvisor ? ['runc', 'gvisor'] : ['runc'],
    default_runtime: r.default,
    ...(r.gvisor ? { gvisor: r.gvisor } : {}),
  };
}

/** The runtime a stack runs under on this host, or an error when the host cannot run it. */
export function resolveRuntime(r: HostRuntimes | undefined, asked: Runtime | undefined): Runtime {
  const runtime = asked ?? r?.default ?? 'runc';
  if (runtime === 'gvisor' && !r?.gvisor)
    throw new Error(
      `this host cannot run gvisor environments: ${r?.problem ?? 'runsc is not set up'}; deploy to a host that reports runtimes [runc, gvisor]`,
    );
  return runtime;
}

/**
 * The runsc binary and state root of the sandbox whose host process is `pid` (Docker's State.Pid of
 * a gVisor container is the sandbox, `runsc-sandbox --root=<root> ...`), read from the host's /proc.
 */
export async function sandboxOf(pid: number): Promise<RunscRoot> {
  const [argv, runsc] = await Promise.all([
    readFile(`/proc/${pid}/cmdline`, 'utf8').then((t) => t.split('\0')),
    readlink(`/proc/${pid}/exe`),
  ]);
  const root = argv.find((a) => a.startsWith('--root='))?.slice('--root='.length);
  if (argv[0] !== 'runsc-sandbox' || !root) throw new Error(`process ${pid} is not a gVisor sandbox`);
  return { runsc, root };
}

/** Where runsc keeps a sandbox's state: the binary to run and its `--root`. */
export interface RunscRoot {
  runsc: string;
  root: string;
}

/** A row of gVisor's process table: pid and parent as its kernel numbers them, uid, command name. */
export interface TaskRow {
  pid: number;
  ppid: number;
  uid: number;
  cmd: string;
}

/**
 * The processes inside a gVisor container as its own kernel (the sentry) sees them: pid, parent,
 * uid and command name (`runsc ps`'s table; its JSON form has pids only). Host /proc shows only the
 * sandbox, so this is the one place to see what a gVisor container runs.
 */
export async function sandboxProcesses(pid: number, containerId: string): Promise<TaskRow[]> {
  return sandboxTable(await sandboxOf(pid), containerId);
}

/** gVisor's process table of a container, through the runsc that runs it. */
export async function sandboxTable(at: RunscRoot, containerId: string): Promise<TaskRow[]> {
  const table = await run(at.runsc, [`--root=${at.root}`, 'ps', containerId]);
  const rows = table.split('\n').slice(1).filter(Boolean);
  return rows.map((row) => {
    const cols = row.trim().split(/\s+/);
    const [uid, p, ppid] = cols.slice(0, 3).map(Number);
    if (!Number.isInteger(uid) || !Number.isInteger(p) || !Number.isInteger(ppid) || cols.length < 8)
      throw new Error(`runsc ps: unreadable row '${row.slice(0, 200)}'`);
    return { pid: p, ppid, uid, cmd: cols.slice(7).join(' ') };
  });
}

/** Sends signal `number` to task `task` of a gVisor container (pid as gVisor's kernel numbers it). */
export async function signalTask(sandboxPid: number, containerId: string, task: number, number: number) {
  await killTask(await sandboxOf(sandboxPid), containerId, task, number);
}

/** The same, through the runsc that runs the container. */
export async function killTask(at: RunscRoot, containerId: string, task: number, number: number) {
  await run(at.runsc, [`--root=${at.root}`, 'kill', `--pid=${task}`, containerId, String(number)]);
}

/** Docker's name of the runtime a container of an environment must have been created with. */
const dockerRuntime = (runtime: Runtime) => (runtime === 'gvisor' ? GVISOR_DOCKER_RUNTIME : 'runc');

/**
 * Fails unless every service's container was created with the environment's runtime: what is
 * reported (the prepare evidence) is what Docker was asked for, checked before anything starts.
 */
export async function checkCreatedRuntime(
  engine: Pick<DockerEngine, 'inspect'>,
  services: string[],
  runtime: Runtime,
): Promise<void> {
  const want = dockerRuntime(runtime);
  for (const service of services) {
    const got = (await engine.inspect(service)).HostConfig.Runtime || 'runc';
    if (got !== want)
      throw new Error(
        `service '${service}' was created with runtime ${got}, not ${want} (x-svc.runtime: ${runtime})`,
      );
  }
}
