// Taking up a deployment this process did not start: after a restart of the control plane, or
// adopted from a replica that stopped (its lease lapsed). Nothing that was running can still be:
// the phase that was running fails with a clear reason (its command is not sent again) and the
// kind's own verdict decides the outcome, exactly as for any other failure.
import { type Db, now } from '../db/types.ts';
import type { Failure } from './kind.ts';
import { adoptDeployment, failOrphanCommands, type Unowned } from './lease-store.ts';
import type { Ownership } from './owners.ts';
import { listPhases, updateDeployment, updatePhase } from './store.ts';

/** How a deployment not started here is taken up: after this process restarted, or adopted from a dead replica. */
export type Recovery = 'restart' | 'adopted';

const INTERRUPTED: Record<Recovery, { running: string; pending: string }> = {
  restart: {
    running: 'control plane restarted during this phase',
    pending: 'control plane restarted before this phase ran',
  },
  adopted: {
    running: 'the control-plane replica running this phase stopped',
    pending: 'the control-plane replica running this deployment stopped before this phase ran',
  },
};

/** Marks where a deployment was cut off and returns the failure its verdict must see. */
export async function interruptedAt(db: Db, id: string, how: Recovery): Promise<Failure | null> {
  const phases = await listPhases(db, id);
  const work = phases.slice(0, -1);
  const cut = work.find((p) => p.Status === 'running') ?? work.find((p) => p.Status === 'pending');
  if (!cut) {
    // Every phase had finished; the verdict was running or about to: run it again.
    const failed = work.find((p) => p.Status === 'failed');
    return failed ? { phase: failed.Name, message: failed.Error } : null;
  }
  const already = work.find((p) => p.Status === 'failed');
  if (already) return { phase: already.Name, message: already.Error };
  const message = INTERRUPTED[how][cut.Status === 'running' ? 'running' : 'pending'];
  await updatePhase(db, id, cut.Seq, { status: 'failed', error: message, finishedAt: now() });
  await updateDeployment(db, id, { error: `${cut.Name}: ${message}` });
  return { phase: cut.Name, message };
}

/**
 * Makes this replica the owner of a deployment nobody runs any more (false when another replica
 * took it first). An adopted one's commands that its dead owner waited for fail now.
 */
export async function takeUp(
  db: Db,
  owners: Ownership,
  log: { warn(obj: object, msg: string): void },
  r: Unowned,
  how: Recovery,
): Promise<boolean> {
  const at = now();
  if (!(await adoptDeployment(db, r, owners.replica, owners.until(), at, how === 'restart'))) return false;
  if (how === 'adopted') {
    log.warn({ deployment: r.id, from: r.owner, replica: owners.replica }, 'adopted a deployment');
    const reason = 'the control-plane replica waiting for this result stopped';
    await failOrphanCommands(db, r.owner, [r.env_id, r.target_env_id], at, reason);
  }
  return true;
}
