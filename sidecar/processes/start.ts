// Starting a live process's exec. Its terminal size: Docker 20.10 ignores an exec's ConsoleSize, so
// the size is set by a resize after the start, which the start waits for (retried while the engine
// has no terminal to resize yet); the command itself waits for it in a small shell (tty.ts), so its
// first instruction sees it.
//
// Live processes in a gVisor container: what the engine reports as an exec's pid is then runsc's
// exec proxy on the host, not the process: the proxy forwards the signals it can catch, but a
// SIGKILL (or SIGSTOP) reaches only the proxy, and the process runs on inside the sandbox (seen
// with runsc 0.0~20221219.0: after a KILL the engine reported exit 137 while `ps` in the container
// still listed the process). So svcd finds the process in gVisor's own process table as it starts
// (the one new top-level task named like its command) and signals it there (`runsc kill --pid`).
// A terminal's command starts as that shell and becomes the command in the same task: at the look
// the task may still be named like the shell, and either name finds it (its pid stays the same).
import { basename } from 'node:path';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import type { Payloads } from '../../protocol/commands.ts';
import { sleep } from '../../shared/concurrency.ts';
import { dockerMessage } from '../docker/errors.ts';
import { sandboxProcesses, signalTask } from '../docker/gvisor.ts';
import { taskOfProxy } from '../docker/gvisor-exec.ts';
import { GVISOR_DOCKER_RUNTIME } from '../docker/render.ts';
import { sizedCommand } from './tty.ts';

/** A process inside a gVisor sandbox: the sandbox's host pid, its container, the task's pid and name there. */
export interface SandboxTask {
  sandboxPid: number;
  containerId: string;
  task: number;
  name: string;
}

type Inspected = { Id: string; State: { Pid: number }; HostConfig: { Runtime?: string } };

/** How long a started exec's task may take to appear in gVisor's table, and how often it is read. */
const TASK_WAIT_MS = 5_000;
const TASK_POLL_MS = 25;

/** What the lookup reads: gVisor's table, and the task an exec proxy's place pairs it with. */
export interface SandboxLookup {
  processes: typeof sandboxProcesses;
  paired: typeof taskOfProxy;
}

/**
 * One start at a time per gVisor container: a new task is told from the others by appearing.
 * Other execs may start meanwhile (svcd's spare shells, health checks, a plain exec), so the new
 * task is checked against the exec proxy's place among the container's proxies (gvisor-exec.ts).
 */
export class SandboxTasks {
  #tails = new Map<string, Promise<void>>();
  readonly #look: SandboxLookup;

  constructor(look: SandboxLookup = { processes: sandboxProcesses, paired: taskOfProxy }) {
    this.#look = look;
  }

  /**
   * For a gVisor container, runs `start` alone among this container's starts and returns the task
   * it added once `running` gives the exec's host pid (0: it does not run; null when none or several
   * could be it); `start` alone for any other container. `launcher`: what the exec runs first and
   * execs `cmd` from.
   */
  async start<T>(
    info: Inspected,
    cmd: string[],
    start: () => Promise<T>,
    running: (value: T) => Promise<number>,
    launcher?: string,
  ): Promise<{ value: T; task: SandboxTask | null }> {
    if (info.HostConfig.Runtime !== GVISOR_DOCKER_RUNTIME || !info.State.Pid)
      return { value: await start(), task: null };
    const sandboxPid = info.State.Pid;
    const tail = this.#tails.get(info.Id) ?? Promise.resolve();
    let release = () => {};
    const mine = new Promise<void>((r) => (release = r));
    const next = tail.then(() => mine);
    this.#tails.set(info.Id, next);
    await tail;
    try {
      // Without gVisor's table (runsc gone, a sandbox that stopped) the process still starts,
      // signalled through its proxy as before.
      const table = () => this.#look.processes(sandboxPid, info.Id).catch(() => null);
      const before = await table();
      const value = await start();
      const proxy = before ? await running(value) : 0;
      if (!proxy) return { value, task: null };
      // The task is recorded under its command's name, the one it has once the launcher exec'd.
      const name = taskName(cmd[0] ?? '');
      const names = new Set([name, taskName(launcher ?? '')]);
      const seen = new Set((before ?? []).map((p) => p.pid));
      const found = (pid: number) => ({ value, task: { sandboxPid, containerId: info.Id, task: pid, name } });
      // The engine reports the exec's pid once runsc's proxy runs, which may be before the task is
      // in the sandbox's table: look again, a bounded while, until it is.
      const deadline = Date.now() + TASK_WAIT_MS;
      for (;;) {
        const rows = await table();
        if (!rows) return { value, task: null };
        const fresh = rows.filter((p) => !seen.has(p.pid) && p.ppid === 0 && names.has(p.cmd));
        if (fresh.length) {
          // One new task may still be another exec's, ours not in the table yet: the pairing
          // decides (a new top-level task, named like the command); the lone new task is taken
          // only where the pairing cannot tell.
          const paired = await this.#look
            .paired(proxy, launcher ? [launcher, ...cmd] : cmd)
            .catch((err: Error) => err.message);
          if (typeof paired !== 'string')
            return !seen.has(paired.pid) && paired.ppid === 0 ? found(paired.pid) : { value, task: null };
          return fresh.length === 1 ? found(fresh[0].pid) : { value, task: null };
        }
        if (Date.now() >= deadline || !(await running(value))) return { value, task: null };
        await sleep(TASK_POLL_MS);
      }
    } finally {
      release();
      if (this.#tails.get(info.Id) === next) this.#tails.delete(info.Id);
    }
  }
}

/** gVisor's table names a task by its program's first 15 characters, as Linux does. */
const taskName = (program: string) => basename(program).slice(0, 15);

/** Signals a process found in a gVisor sandbox. */
export const signalSandboxTask = (t: SandboxTask, number: number) =>
  signalTask(t.sandboxPid, t.containerId, t.task, number);

/** The exec's host pid once the engine reports it (a start under gVisor takes a moment); 0: it ended. */
async function runs(exec: Docker.Exec): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const info = await exec.inspect();
    if (info.Pid) return info.Running ? info.Pid : 0;
    if (!info.Running && info.ExitCode !== null) return 0; // it ended already
    await sleep(50);
  }
  return 0;
}

/** Creates and starts a live process's exec; under gVisor, with the task it is in the sandbox. */
export async function startExec(tasks: SandboxTasks, container: Docker.Container, o: Payloads['proc.start']) {
  const tty = o.tty;
  const info = await container.inspect();
  const env = Object.entries(o.env).map(([k, v]) => `${k}=${v}`);
  const cmd = tty
    ? await sizedCommand(container, o.service, o.cmd, [...(info.Config.Env ?? []), ...env], tty)
    : o.cmd;
  const { value, task } = await tasks.start(
    info,
    o.cmd,
    async () => {
      const exec = await container.exec({
        Cmd: cmd,
        AttachStdin: o.stdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: Boolean(tty),
        User: o.user,
        WorkingDir: o.cwd || undefined,
        Env: env,
        ...(tty ? { ConsoleSize: [tty.rows, tty.cols] } : {}),
      } as Docker.ExecCreateOptions);
      const stream = (await exec.start({
        hijack: true,
        stdin: o.stdin,
        Tty: Boolean(tty),
      })) as unknown as Duplex;
      return { exec, stream };
    },
    ({ exec }) => runs(exec),
    cmd === o.cmd ? undefined : cmd[0],
  );
  return { ...value, task };
}

/**
 * Sets a started exec's terminal size, retried a bounded number of times while the engine refuses,
 * and no more once `ended` says its output ended (the engine then has no exec to resize). A size
 * it could not set is told to `log`: the process runs on with the engine's.
 */
export async function initialSize(
  exec: Docker.Exec,
  tty: { rows: number; cols: number },
  ended: Promise<void>,
  log: (msg: string) => void,
): Promise<void> {
  let gone = false;
  const over = () => {
    gone = true;
  };
  ended.then(over, over);
  for (let i = 0; ; i++) {
    try {
      return await exec.resize({ h: tty.rows, w: tty.cols });
    } catch (err) {
      if (gone) return;
      if (i >= 40) return log(dockerMessage(err));
      await sleep(50);
    }
  }
}
