// A result that arrives after its command was given up (the stream dropped, the control plane
// restarted, the command timed out) still says what the host did (spec "Command lifecycle" 6: the
// sidecar may still finish it). An env.create or env.fork that succeeded for an environment the
// control plane has already failed left a stack and datasets nobody owns: they are removed now.
// A redeploy is left alone (its deployment rolled back or failed with its previous version).
import type { Frame } from '../../protocol/frames.ts';
import { getEnvOnHost } from '../envs/store.ts';
import { getCommand } from '../hosts/command-store.ts';
import type { OrchestratorDeps } from './deps.ts';

export async function lateResult(
  deps: Pick<OrchestratorDeps, 'db' | 'dispatcher' | 'log'>,
  hostId: string,
  f: Frame,
): Promise<void> {
  if (!f.ok || !f.command_id) return;
  const cmd = await getCommand(deps.db, f.command_id);
  if (!cmd || cmd.host_id !== hostId || cmd.status !== 'failed') return;
  if (cmd.kind !== 'env.create' && cmd.kind !== 'env.fork') return;
  const env = await getEnvOnHost(deps.db, cmd.env_id, hostId);
  if (env?.Status !== 'failed') return;
  if (cmd.kind === 'env.create' && env.CurrentVersionID) return;
  deps.log.warn(
    { host: hostId, env: env.ID, command: cmd.id, kind: cmd.kind },
    'a command given up on succeeded late: removing what it made',
  );
  await deps.dispatcher.run({ hostId, teamId: env.TeamID, kind: 'sidecar' }, env.ID, 'env.destroy', {});
}
