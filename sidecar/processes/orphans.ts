// What a restart of svcd leaves behind: the processes it started keep running in their containers
// (an exec is not a child of svcd), but nothing follows or can signal them any more. Each live
// process is recorded as `<data>/processes/<pid>.json` {host pid, start time}; the next start of
// svcd kills every recorded process that is still the same process (same host pid and start time,
// so a reused pid is left alone) with its descendants, then forgets the records.
//
// Under gVisor the host pid is runsc's exec proxy, and killing it leaves the process running in the
// sandbox; so a process found in gVisor's table as it started (start.ts) is recorded with its task
// there, and killed there too: when the sandbox is still the same host process (pid and start
// time) and gVisor still lists that task as a top-level task of the same name.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { descendants, statFields } from '../docker/exec.ts';
import { sandboxOf, sandboxTable } from '../docker/gvisor.ts';
import { killTaskTree } from '../docker/gvisor-exec.ts';
import type { SandboxTask } from './start.ts';

interface Orphan {
  hostPid: number;
  started: string;
  /** Under gVisor: the process in the sandbox, and the sandbox's host start time. */
  sandbox?: SandboxTask & { started: string };
}

const dirOf = (dataDir: string) => join(dataDir, 'processes');

/** The start time of a host process (field 22 of /proc/<pid>/stat), '' when it is gone. */
export async function startTime(hostPid: number): Promise<string> {
  try {
    return statFields(await readFile(`/proc/${hostPid}/stat`, 'utf8'))[19] ?? '';
  } catch {
    return '';
  }
}

export class OrphanRecords {
  #dir: string;
  constructor(dataDir: string) {
    this.#dir = dirOf(dataDir);
    mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
  }

  async record(pid: string, hostPid: number, task?: SandboxTask | null): Promise<void> {
    const started = await startTime(hostPid);
    if (!started) return;
    const o: Orphan = { hostPid, started };
    if (task) {
      const sandboxStarted = await startTime(task.sandboxPid);
      if (sandboxStarted) o.sandbox = { ...task, started: sandboxStarted };
    }
    writeFileSync(join(this.#dir, `${pid}.json`), JSON.stringify(o), { mode: 0o600 });
  }

  forget(pid: string): void {
    rmSync(join(this.#dir, `${pid}.json`), { force: true });
  }
}

/** Kills the processes an earlier svcd started and left running; returns how many it killed. */
export async function killOrphans(dataDir: string): Promise<number> {
  const dir = dirOf(dataDir);
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json'));
  } catch {
    return 0;
  }
  let killed = 0;
  for (const f of files) {
    try {
      const o = JSON.parse(readFileSync(join(dir, f), 'utf8')) as Orphan;
      let hit = Boolean(o.sandbox && (await killInSandbox(o.sandbox)));
      if (Number.isInteger(o.hostPid) && o.hostPid > 1 && (await startTime(o.hostPid)) === o.started) {
        for (const p of [o.hostPid, ...(await descendants(o.hostPid))]) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {}
        }
        hit = true;
      }
      if (hit) killed++;
    } catch {}
    rmSync(join(dir, f), { force: true });
  }
  return killed;
}

/** Kills a recorded process in its gVisor sandbox, when both are still the ones recorded. */
async function killInSandbox(s: NonNullable<Orphan['sandbox']>): Promise<boolean> {
  if (!Number.isInteger(s.sandboxPid) || s.sandboxPid <= 1 || !Number.isInteger(s.task)) return false;
  if (!/^[0-9a-f]{64}$/.test(s.containerId ?? '')) return false;
  if ((await startTime(s.sandboxPid)) !== s.started) return false;
  try {
    const at = await sandboxOf(s.sandboxPid);
    const row = (await sandboxTable(at, s.containerId)).find((t) => t.pid === s.task);
    if (row?.ppid !== 0 || row.cmd !== s.name) return false;
    return (await killTaskTree(at, s.containerId, s.task)).killed;
  } catch {
    return false; // runsc gone, or the sandbox stopped: nothing left there to kill
  }
}
