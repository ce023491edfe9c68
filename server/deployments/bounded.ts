// A phase's time limit (spec "Failure rule" 4): at the limit the phase is cancelled, not just
// no longer waited for.
import { deadline, settledWithin, untilAborted } from '../../shared/concurrency.ts';

/** How long a phase cancelled at its time limit gets to stop before the engine goes on without it. */
export const CANCEL_GRACE_MS = 10_000;

const duration = (ms: number): string =>
  ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : ms >= 1000 ? `${Math.round(ms / 1000)} s` : `${ms} ms`;

/**
 * Runs `work` with a time limit. At the limit the work is cancelled through its signal (a command
 * in flight is failed and its environment's queue freed) and given a short grace to stop, so a
 * phase that timed out is over, not still running beside the phases after it.
 */
export async function bounded<T>(
  work: (signal: AbortSignal) => Promise<T>,
  ms: number,
  what: string,
  graceMs: number,
): Promise<T> {
  const limit = deadline(ms, () => new Error(`${what} timed out after ${duration(ms)}`));
  const running = work(limit.signal);
  try {
    return await untilAborted(running, limit.signal);
  } catch (err) {
    if (!limit.signal.aborted) throw err;
    await settledWithin(running, graceMs);
    throw limit.signal.reason;
  } finally {
    limit.clear();
  }
}
