// Ending a timed-out exec under gVisor. The pid the engine reports for an exec there is runsc's
// exec proxy on the host (`runsc exec ... <container>`), not the process: killing the proxy ends
// the engine's view of the exec while the process runs on inside the sandbox. Nothing ties a proxy
// to its task in gVisor's table (runsc ps gives pid, parent, uid, name and a start time to the
// minute), so this is worked out only when a timeout needs it, never for every exec:
//
// every exec of a gVisor container is one top-level task (parent 0) beside the container's init,
// and one proxy on the host that lives as long as its task. gVisor numbers tasks in the order they
// are created, and each proxy creates its task as it starts, so ranking the container's live
// proxies by host start time and its top-level tasks (init aside) by pid pairs them up. The pairing
// is used only when it holds: as many proxies as tasks, no other proxy started in the same clock
// tick as this one, and the task's name is the command's (or a word of it: `sh -c 'sleep 9'` runs
// as `sleep`). The task and what it started are stopped (so nothing forks past the walk), then
// killed through `runsc kill --pid`, and the answer waits until gVisor no longer lists them.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { basename } from 'node:path';
import { sleep } from '../../shared/concurrency.ts';
import { killTask, type RunscRoot, sandboxTable, type TaskRow } from './gvisor.ts';
import { procChildren } from './proc.ts';

const SIGKILL = 9;
const SIGSTOP = 19;

/** runsc's exec proxy on the host: where its sandbox's state is, the container, its start tick. */
export interface ExecProxy extends RunscRoot {
  pid: number;
  /** Its parent: the container's shim, which starts every exec proxy of the container. */
  ppid: number;
  containerId: string;
  started: number;
}

/** The value of `--flag value` or `--flag=value` among runsc's global arguments. */
function flag(argv: string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === name || argv[i] === `-${name.replace(/^--/, '')}`) return argv[i + 1];
    if (argv[i].startsWith(`${name}=`)) return argv[i].slice(name.length + 1);
  }
  return undefined;
}

/** Host pid `pid` as runsc's exec proxy, or null when it is anything else (under runc: the process). */
export async function execProxy(pid: number): Promise<ExecProxy | null> {
  try {
    const [cmdline, stat] = await Promise.all([
      readFile(`/proc/${pid}/cmdline`, 'utf8'),
      readFile(`/proc/${pid}/stat`, 'utf8'),
    ]);
    const argv = cmdline.split('\0').filter(Boolean);
    if (!argv[0]?.startsWith('runsc') || !argv.includes('exec')) return null;
    const root = flag(argv, '--root');
    const containerId = argv.at(-1) ?? '';
    if (!root || !/^[0-9a-f]{64}$/.test(containerId)) return null;
    // A command in a runc container can name itself anything: only a process in svcd's own mount
    // namespace (runsc's proxy runs on the host; a container's processes never do) is taken for
    // one, so the binary run below is the host file its exe names.
    const [ns, ours, runsc] = await Promise.all([
      readlink(`/proc/${pid}/ns/mnt`),
      readlink('/proc/self/ns/mnt'),
      readlink(`/proc/${pid}/exe`),
    ]);
    if (ns !== ours) return null;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(fields[1]), runsc, root, containerId, started: Number(fields[19]) };
  } catch {
    return null; // gone, or not readable: not a proxy this can use
  }
}

/** The host pids whose parent is `ppid` (its threads' `children` lists), or every pid without them. */
async function childrenOf(ppid: number): Promise<number[]> {
  try {
    return await procChildren(ppid);
  } catch {
    return (await readdir('/proc')).filter((e) => /^\d+$/.test(e)).map(Number);
  }
}

/** Every live exec proxy of the same container, oldest first. */
async function proxiesLike(p: ExecProxy): Promise<ExecProxy[]> {
  const all = await Promise.all((await childrenOf(p.ppid)).map(execProxy));
  return all
    .filter((x): x is ExecProxy => x !== null && x.containerId === p.containerId && x.root === p.root)
    .sort((a, b) => a.started - b.started || a.pid - b.pid);
}

/** Names gVisor may give the task of `cmd`: its program's, or (after an exec) a word of it. */
export function plausibleName(cmd: string[], name: string): boolean {
  if (!name) return false;
  const names = new Set<string>();
  for (const arg of cmd)
    for (const word of arg.split(/[\s;&|()<>"'`]+/)) if (word) names.add(basename(word).slice(0, 15));
  return names.has(name);
}

/** The task of `proxy` in gVisor's table, or why it cannot be told. */
async function taskOf(proxy: ExecProxy, cmd: string[]): Promise<TaskRow | string> {
  let why = '';
  for (let attempt = 0; attempt < 3; attempt++) {
    if (attempt) await sleep(100); // an exec that is ending: its proxy outlives its task briefly
    const [proxies, table] = await Promise.all([proxiesLike(proxy), sandboxTable(proxy, proxy.containerId)]);
    const top = table.filter((t) => t.ppid === 0).sort((a, b) => a.pid - b.pid);
    const execs = top.slice(1); // the lowest is the container's init
    const i = proxies.findIndex((x) => x.pid === proxy.pid);
    if (i < 0) return 'its proxy is gone';
    if (proxies.length !== execs.length) {
      why = `${proxies.length} exec proxies for ${execs.length} top-level tasks in gVisor's table`;
      continue;
    }
    if (proxies.some((x, j) => j !== i && x.started === proxies[i].started))
      return 'another exec started in the same clock tick';
    const task = execs[i];
    if (!plausibleName(cmd, task.cmd)) return `its place in gVisor's table holds '${task.cmd}'`;
    return task;
  }
  return why;
}

/** The task in gVisor's table of the exec whose proxy is host pid `pid`, or why it cannot be told. */
export async function taskOfProxy(pid: number, cmd: string[]): Promise<TaskRow | string> {
  const proxy = await execProxy(pid);
  return proxy ? taskOf(proxy, cmd) : 'it has no exec proxy';
}

/**
 * Kills the process of a gVisor exec inside the sandbox, with every task below it; returns what
 * happened, or a sentence saying why it could not be found (the caller still kills the proxy).
 */
export async function killSandboxExec(
  proxy: ExecProxy,
  cmd: string[],
): Promise<{ killed: boolean; note: string }> {
  const found = await taskOf(proxy, cmd);
  if (typeof found === 'string')
    return { killed: false, note: `it was not found in gVisor's table (${found}) and may still run there` };
  return killTaskTree(proxy, proxy.containerId, found.pid);
}

/**
 * Kills task `root` of a gVisor container and every task below it: each is stopped as it is found
 * (a stopped task forks no more), then all are killed; resolves once gVisor no longer lists them.
 */
export async function killTaskTree(
  at: RunscRoot,
  containerId: string,
  root: number,
): Promise<{ killed: boolean; note: string }> {
  const signal = (task: number, n: number) => killTask(at, containerId, task, n).catch(() => {});
  const tree = new Set([root]);
  await signal(root, SIGSTOP);
  for (let walk = 0; walk < 8; walk++) {
    const table = await sandboxTable(at, containerId).catch(() => []);
    const fresh = table.filter((t) => tree.has(t.ppid) && !tree.has(t.pid)).map((t) => t.pid);
    if (!fresh.length) break;
    for (const t of fresh) tree.add(t);
    await Promise.all(fresh.map((t) => signal(t, SIGSTOP)));
  }
  await Promise.all([...tree].map((t) => signal(t, SIGKILL)));
  for (let i = 0; i < 50; i++) {
    const table = await sandboxTable(at, containerId).catch(() => null);
    if (table && !table.some((t) => tree.has(t.pid))) return { killed: true, note: '' };
    await sleep(100);
  }
  return { killed: false, note: `gVisor still lists task ${root} after SIGKILL` };
}
