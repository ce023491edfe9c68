// The runtime matrix of the Docker tiers: a suite runs its rows once under runc and once under
// gVisor (`x-svc.runtime: gvisor`). The gVisor rows need runsc on the machine (CI installs it);
// without it they are skipped loudly, and fail where the docker tier is required.
import type { Runtime } from '../../protocol/spec.ts';
import { findRunsc } from '../../sidecar/docker/gvisor.ts';
import { tier } from './tiers.ts';

export const RUNTIMES: readonly Runtime[] = ['runc', 'gvisor'];

/** False when gVisor rows can run here, else the loud reason they are skipped. */
export async function gvisorSkip(): Promise<false | string> {
  if (tier('docker') || (await findRunsc())) return false;
  const msg = '*** GVISOR ROWS SKIPPED: runsc is not installed (apt-get install runsc) ***';
  if ((process.env.SVC_REQUIRE_TIERS ?? '').includes('docker')) throw new Error(msg);
  process.stderr.write(`${msg}\n`);
  return msg;
}

/** Each runtime with the `skip` its rows take. */
export async function runtimeRows(): Promise<{ runtime: Runtime; skip: false | string }[]> {
  const gvisor = await gvisorSkip();
  return RUNTIMES.map((runtime) => ({ runtime, skip: runtime === 'gvisor' ? gvisor : false }));
}
