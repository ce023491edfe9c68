// Where a warm-pool claim → first exec goes: the control plane's own view of the
// two commands (env.unpause in the claim, env.exec) from their rows, and the same Docker work done
// raw on the claimed stack's containers right after, as the same-run baseline: listing the
// project's containers, unpausing them all in parallel (after pausing them again), an Engine API
// exec of `true` and a `docker exec` CLI one.
import Docker from 'dockerode';
import type { Db } from '../../server/db/types.ts';
import { sleep } from '../../shared/concurrency.ts';
import { PROJECT_LABEL, SERVICE_LABEL } from '../../sidecar/docker/engine.ts';
import { projectName } from '../../sidecar/docker/render.ts';
import { cliExec, rawExec } from '../exec/baseline.ts';

export const SPLIT_KEYS = ['cpUnpause', 'cpExec', 'rawList', 'rawUnpause', 'rawExec', 'cliExec'] as const;
export type Split = Record<(typeof SPLIT_KEYS)[number], number>;
export const SPLIT_LABELS: Record<keyof Split, string> = {
  cpUnpause: 'in the claim: env.unpause command row, created → finished',
  cpExec: 'in the first exec: env.exec command row, created → finished',
  rawList: 'raw: list the stack’s containers by compose label (Engine API)',
  rawUnpause: 'raw: unpause the stack’s 3 containers in parallel (Engine API)',
  rawExec: 'raw: exec `true` in `main` (Engine API create, start, read, inspect)',
  cliExec: 'raw: `docker exec <main> true` (CLI)',
};

const docker = new Docker();

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function commandMs(db: Db, envId: string, kind: string): Promise<number> {
  const row = await db.get<{ created_at: string; finished_at: string }>(
    'SELECT created_at, finished_at FROM commands WHERE env_id = ? AND kind = ? ORDER BY created_at DESC, id DESC LIMIT 1',
    [envId, kind],
  );
  return row ? Date.parse(row.finished_at) - Date.parse(row.created_at) : Number.NaN;
}

/** The control plane's view: call right after the claim and its first exec. */
export async function commandSplit(db: Db, envId: string): Promise<Pick<Split, 'cpUnpause' | 'cpExec'>> {
  return {
    cpUnpause: await commandMs(db, envId, 'env.unpause'),
    cpExec: await commandMs(db, envId, 'env.exec'),
  };
}

/**
 * Waits (bounded) until no exec is being started in the container (a `runc init` process: svcd's
 * background spare after an exec): a pause that freezes one deadlocks Docker 20.10. svcd's own
 * pauses wait for it (sidecar/docker/spare.ts); this raw pause must too.
 */
async function noExecStarting(id: string): Promise<void> {
  for (let i = 0; i < 250; i++) {
    const top = (await docker.getContainer(id).top({ ps_args: '-o pid,args' })) as { Processes: string[][] };
    if (!top.Processes.some((p) => p.join(' ').includes('runc init'))) return;
    await sleep(20);
  }
  throw new Error(`an exec in ${id} is still starting after 5 s`);
}

/** The same Docker work done raw on the claimed stack; call before the environment is destroyed. */
export async function rawSplit(envId: string): Promise<Omit<Split, 'cpUnpause' | 'cpExec'>> {
  const filters = { label: [`${PROJECT_LABEL}=${projectName(envId)}`] };
  let list: Docker.ContainerInfo[] = [];
  const rawList = await timed(async () => {
    list = await docker.listContainers({ all: true, filters });
  });
  const containers = list.map((c) => docker.getContainer(c.Id));
  const main = list.find((c) => c.Labels[SERVICE_LABEL] === 'main');
  if (!main) throw new Error(`no main container in ${envId}`);
  await noExecStarting(main.Id);
  await Promise.all(containers.map((c) => c.pause()));
  const rawUnpause = await timed(() => Promise.all(containers.map((c) => c.unpause())));
  return {
    rawList,
    rawUnpause,
    rawExec: await timed(() => rawExec(docker.getContainer(main.Id))),
    cliExec: await timed(() => cliExec(main.Id)),
  };
}
