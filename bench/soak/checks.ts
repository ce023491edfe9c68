// End-of-run checks: every deployment ends (polled with a bound), every environment the run made
// is destroyed through the API, and nothing of theirs is left on the host: containers, networks
// and volumes of their compose projects (test/e2e's `leftovers`), firewall rules tagged with
// their ids, their bridges, and mounts under the local sidecar's data directory.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from '../../server/db/open.ts';
import { bridgeName } from '../../sidecar/docker/render.ts';
import { leftovers } from '../../test/e2e/real.ts';
import { type Client, sleep } from './http.ts';

export interface EndState {
  /** Deployments still unfinished when the bound passed: `id kind status`. */
  stuck: string[];
  /** Environments the API did not destroy: `id status`. */
  notDestroyed: string[];
  /** What is left on the host, one line per object. */
  left: string[];
  environments: number;
  deployments: number;
}

async function rows<T>(target: string, sql: string): Promise<T[]> {
  const db = connect(target);
  try {
    return await db.all<T>(sql);
  } finally {
    await db.close();
  }
}

const unfinished = (target: string) =>
  rows<{ id: string; kind: string; status: string }>(
    target,
    'SELECT id, kind, status FROM deployments WHERE finished_at IS NULL',
  );

/** Polls until no deployment is running or `boundMs` passes; the unfinished ones then. */
export async function awaitDeployments(target: string, boundMs: number): Promise<string[]> {
  const t0 = Date.now();
  for (;;) {
    const left = await unfinished(target);
    if (!left.length || Date.now() - t0 > boundMs) return left.map((d) => `${d.id} ${d.kind} ${d.status}`);
    await sleep(2000);
  }
}

/** Empties the pools and destroys every live environment through the API, then waits for the deployments. */
export async function destroyEverything(c: Client, target: string, boundMs: number): Promise<void> {
  for (const v of await rows<{ version_id: string }>(target, 'SELECT DISTINCT version_id FROM pool_members'))
    await c.call('DELETE', `/v1/versions/${v.version_id}/pool`);
  // Pool members being made finish first; then everything still standing goes.
  await awaitDeployments(target, boundMs);
  const live = await rows<{ id: string }>(target, "SELECT id FROM environments WHERE status <> 'destroyed'");
  for (const e of live) await c.call('DELETE', `/v1/envs/${e.id}`);
  await awaitDeployments(target, boundMs);
}

function lines(cmd: string, args: string[]): string[] {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n');
  } catch {
    return [];
  }
}

export async function endState(target: string, devDir: string, deployBoundMs: number): Promise<EndState> {
  const stuck = await awaitDeployments(target, deployBoundMs);
  const envs = await rows<{ id: string; status: string }>(target, 'SELECT id, status FROM environments');
  const deployments = await rows<{ n: number | string }>(target, 'SELECT COUNT(*) AS n FROM deployments');
  const notDestroyed = envs
    .filter((e) => e.status !== 'destroyed' && e.status !== 'empty')
    .map((e) => `${e.id} ${e.status}`);
  const rules = [...lines('iptables-save', []), ...lines('ip6tables-save', [])];
  const links = lines('ip', ['-o', 'link', 'show']);
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const left: string[] = [];
  for (const e of envs) {
    left.push(...leftovers(e.id));
    const tag = `svc:${e.id}`;
    left.push(...rules.filter((l) => l.includes(tag)).map((l) => `rule ${l}`));
    const bridge = bridgeName(e.id);
    if (links.some((l) => l.includes(` ${bridge}:`) || l.includes(` ${bridge}@`)))
      left.push(`link ${bridge}`);
    left.push(...mounts.filter((l) => l.includes(e.id)).map((l) => `mount ${l.split(' ')[4]}`));
  }
  // The sidecar's own XFS store stays mounted while it runs; anything mounted under it is an env's.
  const store = `${devDir}/data/.xfs/mnt`;
  for (const l of mounts) {
    const at = l.split(' ')[4] ?? '';
    if (at.startsWith(`${devDir}/`) && at !== store && !left.includes(`mount ${at}`))
      left.push(`mount ${at}`);
  }
  return {
    stuck,
    notDestroyed,
    left,
    environments: envs.length,
    deployments: Number(deployments[0]?.n ?? 0),
  };
}
