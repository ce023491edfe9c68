// What must hold after any fault: no deployment left `running`, every command
// answered exactly once, no orphan container, network or dataset, and every environment usable
// (exec works) or cleanly failed.
import assert from 'node:assert/strict';
import { leftovers } from '../e2e/real.ts';
import { type FaultStack, until } from './faults-stack.ts';

/**
 * Waits until nothing is in flight: no open deployment, no command without its result (a host
 * that reconnects is asked for host.report), no command still running on the host.
 */
export async function settle(s: FaultStack): Promise<void> {
  await until(
    () =>
      s.query("SELECT id FROM deployments WHERE status IN ('pending', 'running')").length === 0 &&
      s.query('SELECT id FROM commands WHERE finished_at IS NULL').length === 0 &&
      s.runningOnHost().length === 0,
    `every deployment and command to finish\n--- server\n${s.serverLog.slice(-3000)}\n--- svcd\n${s.sidecarLog.slice(-3000)}`,
    240_000,
  );
}

interface EnvRow {
  id: string;
  name: string;
  status: string;
  current_version_id: string;
}

/** The invariants; `firstService` names the service exec is tried in for each running environment. */
export async function checkInvariants(s: FaultStack, firstService: string): Promise<void> {
  await settle(s);
  const open = s.query<{ id: string }>("SELECT id FROM deployments WHERE status IN ('pending', 'running')");
  assert.deepEqual(open, [], 'a deployment was left running');

  assert.deepEqual(s.runningOnHost(), [], 'a command is still marked running on the host');
  // A result the control plane took as success is the one the host stored (never run twice).
  // Destroying an environment removes the stored results of its commands but its own.
  for (const c of s.query<{ id: string; kind: string }>(
    `SELECT c.id, c.kind FROM commands c LEFT JOIN environments e ON e.id = c.env_id
      WHERE c.status = 'succeeded' AND (e.status IS NULL OR e.status <> 'destroyed' OR c.kind = 'env.destroy')`,
  )) {
    assert.ok(s.hostResult(c.id), `${c.kind} ${c.id} succeeded without a stored result on the host`);
  }

  const envs = s.query<EnvRow>('SELECT id, name, status, current_version_id FROM environments');
  const live = new Set<string>();
  for (const e of envs) {
    assert.ok(
      ['empty', 'running', 'failed', 'destroyed'].includes(e.status),
      `environment ${e.name} (${e.id}) was left ${e.status}`,
    );
    if (e.status === 'running') {
      live.add(e.id);
      const r = await s.req('POST', `/v1/envs/${e.id}/exec`, {
        service: firstService,
        cmd: ['true'],
        timeout_sec: 30,
      });
      assert.equal(r.status, 200, `exec in running ${e.name}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.exit_code, 0);
    } else {
      // Removal after a late result is asynchronous: give it its time before calling it orphaned.
      await until(
        () => leftovers(e.id).length === 0 && !s.envDirs().includes(e.id),
        `${e.status} environment ${e.name} to have nothing left on the host`,
        60_000,
      ).catch(() => {});
      assert.deepEqual(leftovers(e.id), [], `${e.status} environment ${e.name} left Docker objects`);
    }
  }
  const orphans = s.envDirs().filter((id) => !live.has(id));
  assert.deepEqual(orphans, [], 'datasets of an environment that is not running are left on the host');
}
