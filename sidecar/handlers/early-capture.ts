// The deploy's snapshot of a fresh create, copied while the container starts.
//
// A deploy creates the environment and then snapshots it under the version's name (the version a
// fork, a rollback or a pool member starts from). When every volume is quiet (quiet.ts: an empty
// root that last changed well before, runc, a storage layer that says when it has copied) just
// before the containers start, env.create stamps the roots and starts that snapshot at once,
// beside the container start; the storage layer copies and then holds the copy unpublished.
// env.snapshot of that name publishes it only if the copy is complete and the roots are still
// unchanged since the stamps (so the volumes held the copied content from the stamps until now,
// the snapshot's instant), and only after the stay-up window passed; otherwise the copy is
// discarded before anything is published and the snapshot is taken the usual way. A snapshot of
// another name, a new create, a rollback, a destroy or a failed create discard it too.
import type { SidecarContext } from '../context.ts';
import { assertQuiet, type Stamp, VolumesChanged } from './quiet.ts';

export interface EarlyCapture {
  name: string;
  stamps: Stamp[];
  /** How long the copy took (-1 while it runs). */
  copiedMs(): number;
  /** Publishes the copy when it is complete and the volumes unchanged; VolumesChanged otherwise. */
  publish(): Promise<string[]>;
  /** Drops the copy (nothing is published); settles once the storage layer has removed it. */
  discard(): Promise<void>;
}

class Discarded extends Error {}

/** Starts the copy of `volumes` under `name` and keeps it for the environment's next snapshot. */
export function beginEarlyCapture(
  ctx: SidecarContext,
  envId: string,
  name: string,
  volumes: string[],
  stamps: Stamp[],
): EarlyCapture {
  let release: (publish: boolean) => void = () => {};
  const gate = new Promise<boolean>((resolve) => {
    release = resolve;
  });
  let copiedAt: () => void = () => {};
  const copied = new Promise<void>((resolve) => {
    copiedAt = resolve;
  });
  const t0 = performance.now();
  let took = -1;
  const done = ctx.storage.snapshot(envId, name, volumes, async () => {
    took = performance.now() - t0;
    copiedAt();
    if (!(await gate)) throw new Discarded('the early copy was discarded');
  });
  done.catch(() => {}); // published or discarded through this object; never left unobserved
  const capture: EarlyCapture = {
    name,
    stamps,
    copiedMs: () => took,
    async publish() {
      try {
        // The copy must be complete before the check, so the check covers all of it.
        await Promise.race([copied, done]);
        if (took < 0) throw new VolumesChanged('the early copy did not complete');
        await assertQuiet(stamps);
      } catch (err) {
        await capture.discard();
        throw err instanceof VolumesChanged ? err : new VolumesChanged((err as Error).message);
      }
      release(true);
      return done;
    },
    async discard() {
      release(false);
      await done.catch(() => {});
    },
  };
  ctx.engineState.early.set(envId, capture);
  return capture;
}

/** The environment's early copy, no longer kept for anyone else. */
export function takeEarly(ctx: SidecarContext, envId: string): EarlyCapture | undefined {
  const early = ctx.engineState.early.get(envId) as EarlyCapture | undefined;
  ctx.engineState.early.delete(envId);
  return early;
}

/** Discards the environment's early copy, if any. */
export async function dropEarly(ctx: SidecarContext, envId: string): Promise<void> {
  await takeEarly(ctx, envId)?.discard();
}
