// Proving a keeper steady. A service without a healthcheck counts as healthy once it has stayed up
// one probe interval (active-health.ts): that window shows a command did not fail at once. svc's
// own idle process (protocol/keeper.ts) cannot end on its own once its loop runs, so for it a
// start may prove as much sooner: the container's main process (or, under Docker's init, init's one
// child) runs exactly the keeper's argv, after any image entrypoint exec'd it, and has a child of
// its own (the loop's `sleep`: the shell read its script, set its trap and reached the loop).
// Anything else proves nothing within a few looks, and the window applies as before: an image
// entrypoint that keeps running around the keeper, gVisor (the engine's pid is then the sandbox's,
// not the keeper's), a /proc that cannot be read. The pid comes from the engine's inspect, on the
// host, where svcd runs.
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KEEPER } from '../../protocol/keeper.ts';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { procArgv as argv, procChildren as children } from './proc.ts';

/** How often, and how many times, a start looks for the proof before it leaves it to the window. */
const LOOK_EVERY_MS = 5;
export const KEEPER_LOOKS = 20;

/** Whether a service's command is the keeper (and nothing else decides its health). */
export function runsKeeper(svc: ServiceRecord): boolean {
  const cmd = svc.command;
  return (
    !svc.health &&
    Array.isArray(cmd) &&
    cmd.length === KEEPER.length &&
    cmd.every((a, i) => a === KEEPER[i]) &&
    !svc.entrypoint?.length
  );
}

const isKeeper = (args: string[]) => args.length === KEEPER.length && args.every((a, i) => a === KEEPER[i]);
const isInit = (args: string[]) => args[0]?.endsWith('/docker-init') === true && args[1] === '--';

/** What one look shows: a steady keeper, one that may yet be, or a process that never will be. */
export type Look = 'steady' | 'not yet' | 'no';

/** One look at the container whose main process is host pid `pid`. */
export async function lookAtKeeper(pid: number): Promise<Look> {
  if (!Number.isInteger(pid) || pid <= 0) return 'no';
  try {
    let keeper = pid;
    const main = await argv(pid);
    // Under gVisor the engine's pid is the sandbox's: the keeper is not among the host's processes.
    if (basename(main[0] ?? '').startsWith('runsc')) return 'no';
    if (isInit(main)) {
      const kids = await children(pid);
      if (kids.length > 1) return 'no';
      if (kids.length === 0) return 'not yet';
      keeper = kids[0];
    }
    // Not the keeper yet: runc's own process before the exec, or an image entrypoint that may
    // still exec it ("$@"); one that keeps running around it never becomes it, and the looks end.
    if (!isKeeper(await argv(keeper))) return 'not yet';
    return (await children(keeper)).length > 0 ? 'steady' : 'not yet';
  } catch {
    return 'no'; // gone, or not readable: no proof
  }
}

/**
 * Looks a few times, a few milliseconds apart, as the keeper starts; false leaves it to the window.
 * `looks`: how many (a test on a loaded machine gives its keeper longer to reach its loop).
 */
export async function provenKeeper(pid: number, looks = KEEPER_LOOKS): Promise<boolean> {
  for (let i = 0; i < looks; i++) {
    const look = await lookAtKeeper(pid);
    if (look !== 'not yet') return look === 'steady';
    await sleep(LOOK_EVERY_MS);
  }
  return false;
}
