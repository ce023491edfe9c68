// env.snapshot: checkpoint the databases, freeze every container, capture every volume under the
// snapshot name, thaw all but `keep_paused`, and wait for health (spec "Command kinds"). Everything
// that can happen before the freeze or after the thaw does, to keep frozen_for short.
import type { Results } from '../../protocol/commands.ts';
import { settledWithin } from '../../shared/concurrency.ts';
import { Timings } from '../../shared/timings.ts';
import { requireSpec, type SidecarContext, saveVersionSpec, stackOf } from '../context.ts';
import { checkpointDatabases } from '../docker/checkpoint.ts';
import { healthyBefore as checkHealthyBefore } from '../docker/health.ts';
import { SPARE_READY_WAIT_MS } from '../docker/spare.ts';
import type { CommandContext } from '../runner.ts';
import { type EarlyCapture, takeEarly } from './early-capture.ts';
import { primeSpare } from './pause.ts';
import { assertQuiet, quietEligible, quietVolumes, VolumesChanged } from './quiet.ts';
import { settleStayUp } from './stay-up.ts';

export const POST_SNAPSHOT_HEALTH_MS = 90_000;

export async function envSnapshot(
  ctx: SidecarContext,
  cmd: CommandContext<'env.snapshot'>,
): Promise<Results['env.snapshot']> {
  const spec = await requireSpec(ctx, cmd.envId);
  // Volumes that are empty and untouched (a sandbox just created) are captured without the
  // database checkpoints and the freeze, and proven unchanged across the copy (quiet.ts).
  const quietPossible = quietEligible(ctx.storage.kind, spec);
  // The create may have copied them already while its containers started (early-capture.ts).
  let early = takeEarly(ctx, cmd.envId);
  if (early && (early.name !== cmd.payload.name || cmd.payload.keep_paused?.length || !quietPossible)) {
    await early.discard();
    early = undefined;
  }
  const t0 = performance.now();
  const paths = spec.volumes.map((v) => ctx.storage.volumePath(cmd.envId, v));
  const quiet = early ? early.stamps : quietPossible ? await quietVolumes(paths) : null;
  const quietMs = performance.now() - t0;
  if (!quiet) return take(ctx, cmd, spec, null, quietMs);
  try {
    return await take(ctx, cmd, spec, quiet, quietMs, early);
  } catch (err) {
    if (!(err instanceof VolumesChanged)) throw err;
    cmd.progress(`${err.message}: captured again, frozen`);
    return take(ctx, cmd, spec, null, quietMs);
  }
}

async function take(
  ctx: SidecarContext,
  cmd: CommandContext<'env.snapshot'>,
  spec: Awaited<ReturnType<typeof requireSpec>>,
  quiet: Awaited<ReturnType<typeof quietVolumes>>,
  quietMs: number,
  early?: EarlyCapture,
): Promise<Results['env.snapshot']> {
  const { name, keep_paused: keep = [] } = cmd.payload;
  const stack = stackOf(ctx, cmd.envId, spec);
  const engine = stack.engine;
  const timings = new Timings();
  const t0 = performance.now();
  if (quietMs >= 0.5) timings.add('quiet_check', quietMs);

  // Databases flush to disk first, so the captured files are what a clean restart expects.
  // Health is checked while the databases checkpoint, so after the thaw only what changed since
  // (a restart, a failed check) needs a check of its own.
  // One listing serves the three (the freeze below lists again, for the states it acts on).
  const listed = await engine.containers();
  const wanted = spec.services.filter((s) => !keep.includes(s.name));
  const healthyBefore = checkHealthyBefore(engine, wanted, listed).catch(() => undefined);
  // The snapshot deployment's next phase runs a command in the first service (spec: health): a
  // spare exec started now, hidden behind the checkpoints, takes it after the thaw.
  const first = spec.services[0]?.name;
  const spare =
    first && !keep.includes(first) ? primeSpare(engine, first, listed).catch(() => false) : undefined;
  // What a snapshot captures is the volumes: a stack that mounts none (an image sandbox with
  // `volumes: []`) has nothing a container could change under the capture, so nothing is
  // checkpointed or frozen for it: only services to be left paused (`keep_paused`) are paused, and
  // what was paused before and is not kept is thawed, as after any capture.
  const freezes = spec.volumes.length > 0 && !quiet;
  const pauses = (c: { service: string; state: string }) =>
    c.state === 'running' && (freezes || keep.includes(c.service));
  let consistent = true;
  try {
    const done = freezes
      ? await timings.step('checkpoints', () => checkpointDatabases(engine, spec.services, undefined, listed))
      : [];
    for (const d of done)
      cmd.progress(`checkpointed ${d.kind} in ${d.service} (${d.detail}, ${d.took_ms} ms)`);
  } catch (err) {
    // The freeze still gives a crash-consistent copy; say it was not a clean checkpoint.
    consistent = false;
    cmd.progress(`checkpoint failed, capturing crash-consistent: ${(err as Error).message}`);
  }
  // The freeze covers only the capture, to keep frozen_for short: the volumes are flushed and the
  // containers listed while the stack still runs; paused, the storage layer's copy is one reflink.
  const passedBefore = await timings.step('health_before', () => healthyBefore);
  // A pause must not freeze the spare's exec while runc starts it (spare.ts): it waits for it.
  // Without a pause the spare starts while the capture runs and is waited for at the end.
  const spareReady = async () => {
    if (spare) await timings.step('spare', () => settledWithin(spare, SPARE_READY_WAIT_MS));
  };
  // A create just before may have left its containers' stay-up window open (stay-up.ts): a
  // capture is never published, nor a stack frozen, before the window has passed.
  const stayUp = async () => {
    if (ctx.engineState.stayUps.has(cmd.envId))
      await timings.step('stay_up', () => settleStayUp(ctx, cmd.envId));
  };
  const pausing = freezes || keep.length > 0;
  if (pausing) await spareReady();
  if (!early)
    await timings.step('flush', async () => ctx.storage.prepareSnapshot?.(cmd.envId, name, spec.volumes));
  if (pausing) await stayUp();
  const before = await engine.containers();
  const toPause = before.filter(pauses);
  const toThaw = before.filter((c) => (c.state === 'paused' || pauses(c)) && !keep.includes(c.service));
  const frozenAt = Date.now();
  timings.add('before_freeze', performance.now() - t0);
  try {
    await timings.step('pause', () => engine.freezeEach('pause', toPause));
  } catch (err) {
    // The pause thawed what it froze before giving up (engine.ts); what was paused before the
    // snapshot and is not kept paused runs again too, as after a capture (each found by its state now).
    await engine.unpause(toThaw.map((c) => c.service)).catch(() => {});
    throw err;
  }
  let datasets: string[];
  let frozenFor = -1;
  let healthy: Promise<void> = Promise.resolve();
  // Thawed as soon as the storage layer has captured the content (before it flushes and
  // publishes the snapshot), or at the latest when the snapshot returns or fails.
  const thaw = async () => {
    if (frozenFor >= 0) return;
    frozenFor = 0;
    await timings.step('unpause', () => engine.freezeEach('unpause', toThaw));
    frozenFor = toPause.length ? Date.now() - frozenAt : 0;
    // Health is awaited while the snapshot is made durable. Services left paused on purpose are
    // not asked to be healthy; every other one is. When nothing was frozen or thawed, a service
    // that passed its check just before and still runs in the listing taken after it needs no
    // second check: the freeze that could have disturbed it did not happen.
    const untouched = !toPause.length && !toThaw.length;
    const passed = wanted.every((s) =>
      before.some((c) => c.service === s.name && c.state === 'running' && passedBefore?.has(c.id)),
    );
    if (untouched && passed) return;
    healthy = stack.waitHealthy(POST_SNAPSHOT_HEALTH_MS, { skip: keep, before: passedBefore });
    healthy.catch(() => {}); // awaited below when the snapshot succeeds
  };
  try {
    await ctx.hold?.('env.snapshot:frozen', cmd.id);
    // Quiet volumes are checked unchanged before the copy is published; a change discards it.
    const captured = async () => {
      await stayUp();
      if (quiet) await assertQuiet(quiet);
      await thaw();
    };
    // An early copy is published once the window passed and its volumes are proven unchanged.
    const publish = async (copy: EarlyCapture) => {
      await stayUp().catch(async (err) => {
        await copy.discard();
        throw err;
      });
      await thaw();
      const out = await copy.publish();
      timings.add('early_copy', copy.copiedMs());
      return out;
    };
    datasets = await timings.step('capture', () =>
      early ? publish(early) : ctx.storage.snapshot(cmd.envId, name, spec.volumes, captured),
    );
  } finally {
    await thaw();
  }
  await timings.step('save_spec', () => saveVersionSpec(ctx, cmd.envId, name, { ...spec, version: name }));
  cmd.progress(
    `captured ${datasets.length} dataset${datasets.length === 1 ? '' : 's'}; frozen for ${frozenFor} ms`,
  );
  await timings.step('health_after', () => healthy);
  await stayUp(); // a storage layer that did not say when it captured
  if (!pausing) await spareReady();
  return { snapshot: name, datasets, frozen_for: frozenFor, consistent, timings: timings.ms };
}
