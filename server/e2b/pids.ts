// The envd pids of a sandbox's processes. envd numbers processes (uint32 pids) where svc names them
// (`proc_…`); the numbers, with the tag and config each caller gave, live in the database
// (`e2b_processes`), so a process started through one control-plane replica is found by pid or tag
// through any other, and after a restart.
import { Code, ConnectError } from '@connectrpc/connect';
import { parseJson, type Queryable } from '../db/types.ts';
import { findProcess, insertProcess, nextPid, pidsOf } from './store.ts';

export interface Known {
  proc: string;
  tag?: string;
  config: { cmd: string; args: string[]; envs: Record<string, string>; cwd?: string };
  tty: boolean;
}

export type Selector = {
  selector: { case: 'pid'; value: number } | { case: 'tag'; value: string } | { case: undefined };
};

/** A process the host lists (svc's record of it). */
interface Listed {
  pid: string;
  cmd: string[];
  tty: boolean;
}

const known = (r: { proc: string; tag: string; config: string; tty: number }): Known => ({
  proc: r.proc,
  ...(r.tag ? { tag: r.tag } : {}),
  config: parseJson(r.config, { cmd: '', args: [], envs: {} }),
  tty: Boolean(r.tty),
});

export class ProcessNumbers {
  readonly #db: Queryable;

  constructor(db: Queryable) {
    this.#db = db;
  }

  /** Numbers a process; its existing number when it has one. */
  async add(sandboxId: string, k: Known): Promise<number> {
    const pid = await nextPid(this.#db, sandboxId);
    if (pid === undefined) throw new ConnectError('the sandbox is gone', Code.NotFound);
    const row = { pid, proc: k.proc, tag: k.tag ?? '', config: JSON.stringify(k.config), tty: k.tty ? 1 : 0 };
    if (await insertProcess(this.#db, sandboxId, row)) return pid;
    // Numbered meanwhile by another request (a list racing a start): that number stands.
    const [had] = await pidsOf(this.#db, sandboxId, [k.proc]);
    if (!had) throw new ConnectError('the process could not be numbered', Code.Internal);
    return had.pid;
  }

  /** The process a selector names; NotFound when none. */
  async find(sandboxId: string, sel: Selector | undefined): Promise<{ pid: number; k: Known }> {
    const s = sel?.selector;
    const r =
      s?.case === 'pid'
        ? await findProcess(this.#db, sandboxId, { pid: s.value })
        : s?.case === 'tag'
          ? await findProcess(this.#db, sandboxId, { tag: s.value })
          : undefined;
    if (!r)
      throw new ConnectError(
        `process ${s?.case === 'tag' ? `with tag ${s.value}` : s?.case === 'pid' ? s.value : ''} not found`,
        Code.NotFound,
      );
    return { pid: r.pid, k: known(r) };
  }

  /** Each listed process with its number; one started outside envd's API gets one now. */
  async numbered(sandboxId: string, listed: Listed[]): Promise<{ pid: number; k: Known }[]> {
    const rows = new Map(
      (
        await pidsOf(
          this.#db,
          sandboxId,
          listed.map((p) => p.pid),
        )
      ).map((r) => [r.proc, r]),
    );
    const out: { pid: number; k: Known }[] = [];
    for (const p of listed) {
      const r = rows.get(p.pid);
      if (r) {
        out.push({ pid: r.pid, k: known(r) });
        continue;
      }
      const k: Known = {
        proc: p.pid,
        config: { cmd: p.cmd[0] ?? '', args: p.cmd.slice(1), envs: {} },
        tty: p.tty,
      };
      out.push({ pid: await this.add(sandboxId, k), k });
    }
    return out;
  }
}
