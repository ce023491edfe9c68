// Host processes as /proc shows them to svcd (which runs on the host, in its pid namespace).
import { readdir, readFile } from 'node:fs/promises';

/** The argv of host pid `pid`; throws when it is gone or unreadable. */
export async function procArgv(pid: number): Promise<string[]> {
  const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
  return raw.split('\0').slice(0, -1);
}

/** The host pids whose parent is `pid` (each thread's `children` list); throws when unreadable. */
export async function procChildren(pid: number): Promise<number[]> {
  const threads = await readdir(`/proc/${pid}/task`);
  const lists = await Promise.all(threads.map((t) => readFile(`/proc/${pid}/task/${t}/children`, 'utf8')));
  return lists.flatMap((l) => l.split(' ').filter(Boolean).map(Number));
}
