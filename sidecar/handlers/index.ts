// Command kind → handler. Kinds not listed (egress.set, clock.set, ingress.set, anything else)
// are answered `unknown command kind` by the runner.

import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Capabilities } from '../../protocol/commands.ts';
import { envDir, loadSpec, pooled, type SidecarContext, stackOf } from '../context.ts';
import { fsList, fsMkdir, fsMove, fsRemove, fsStat } from '../fs/ops.ts';
import { fsRead, fsWrite } from '../fs/transfer.ts';
import { fsWatch } from '../fs/watch.ts';
import type { CommandContext, Handlers } from '../runner.ts';
import { verifyCollect } from '../verify/collect.ts';
import { verifyRun } from '../verify/run.ts';
import { envDestroy } from './destroy.ts';
import { dropEarly } from './early-capture.ts';
import { envExec, envGet, envPut, hostReport } from './io.ts';
import { envPause, envUnpause } from './pause.ts';
import { processHandlers } from './processes.ts';
import { envSnapshot } from './snapshot.ts';
import { envCreate, envFork, envRollback } from './stack-ops.ts';
import { dropStayUp, settleStayUp } from './stay-up.ts';

export function handlers(ctx: SidecarContext, capabilities: () => Promise<Capabilities>): Handlers {
  return afterStayUp(ctx, {
    'host.report': (cmd) => hostReport(ctx, cmd, capabilities),
    'env.create': (cmd) => pooled(ctx, 'setup', cmd, () => envCreate(ctx, cmd)),
    'env.snapshot': (cmd) => envSnapshot(ctx, cmd),
    'env.fork': (cmd) => pooled(ctx, 'setup', cmd, () => envFork(ctx, cmd)),
    'env.rollback': (cmd) => pooled(ctx, 'setup', cmd, () => envRollback(ctx, cmd)),
    'env.exec': (cmd) => envExec(ctx, cmd),
    'env.put': (cmd) => envPut(ctx, cmd),
    'env.get': (cmd) => envGet(ctx, cmd),
    'verify.collect': (cmd) => verifyCollect(ctx, cmd),
    'verify.run': (cmd) => verifyRun(ctx, cmd),
    'env.destroy': (cmd) => pooled(ctx, 'teardown', cmd, () => envDestroy(ctx, cmd)),
    'env.pause': (cmd) => envPause(ctx, cmd),
    'env.unpause': (cmd) => envUnpause(ctx, cmd),
    'fs.stat': (cmd) => fsStat(ctx, cmd),
    'fs.list': (cmd) => fsList(ctx, cmd),
    'fs.mkdir': (cmd) => fsMkdir(ctx, cmd),
    'fs.move': (cmd) => fsMove(ctx, cmd),
    'fs.remove': (cmd) => fsRemove(ctx, cmd),
    'fs.read': (cmd) => fsRead(ctx, cmd),
    'fs.write': (cmd) => fsWrite(ctx, cmd),
    'fs.watch': (cmd) => fsWatch(ctx, cmd),
    ...(ctx.processes ? processHandlers(ctx.processes) : {}),
  });
}

/**
 * Kinds that replace or remove the stack: an open stay-up window of the old one says nothing, and
 * its early copy (early-capture.ts) is not the snapshot anyone will ask for.
 */
const REPLACES = new Set(['env.create', 'env.rollback', 'env.destroy']);

/**
 * Every command of an environment waits for the stay-up window its create left open (stay-up.ts),
 * but env.snapshot, which does its own work meanwhile and waits before it freezes or publishes.
 */
function afterStayUp(ctx: SidecarContext, all: Handlers): Handlers {
  const out: Record<string, (cmd: CommandContext) => Promise<unknown>> = {};
  for (const [kind, handler] of Object.entries(all)) {
    const run = handler as (cmd: CommandContext) => Promise<unknown>;
    if (kind === 'env.snapshot') out[kind] = run;
    else if (REPLACES.has(kind))
      out[kind] = async (cmd) => {
        dropStayUp(ctx, cmd.envId);
        await dropEarly(ctx, cmd.envId);
        return run(cmd);
      };
    else
      out[kind] = async (cmd) => {
        await settleStayUp(ctx, cmd.envId);
        return run(cmd);
      };
  }
  return out as Handlers;
}

/**
 * What a command cut off by a crash leaves to undo: a half-created environment or fork is taken
 * down (a fork's copied datasets too), so no container is orphaned; a capture cut off while the
 * stack was frozen thaws it, so the environment is usable again.
 */
export async function undoInterrupted(ctx: SidecarContext, kind: string, envId: string): Promise<void> {
  if (envId && kind === 'env.snapshot') return thaw(ctx, envId);
  if (!envId || (kind !== 'env.create' && kind !== 'env.fork')) return;
  // A redeploy of an environment that has snapshots keeps everything: the control plane rolls
  // it back to its previous version. Only a first create or a fork is taken away whole.
  if (kind === 'env.create' && (await hasVersions(ctx, envId))) return;
  ctx.log(`undoing ${kind} of ${envId} cut off by a restart`);
  await envDestroy(ctx, { id: '', envId, payload: {}, progress: () => {} });
}

async function hasVersions(ctx: SidecarContext, envId: string): Promise<boolean> {
  const files = await readdir(join(envDir(ctx, envId), 'versions')).catch(() => []);
  return files.some((f) => f.endsWith('.json'));
}

async function thaw(ctx: SidecarContext, envId: string): Promise<void> {
  const spec = await loadSpec(ctx, envId);
  if (!spec) return;
  const thawed = await stackOf(ctx, envId, spec).engine.unpause();
  if (thawed.length)
    ctx.log(`thawed ${thawed.join(', ')} of ${envId} after env.snapshot was cut off by a restart`);
}
