// Control of one live process (stdin, its close, resize, signals) applied in the order it
// arrived, one step at a time, beside the environment's command queue: a resize never overtakes
// keystrokes sent before it, nor keystrokes sent after it the resize. A step is done once the
// engine has it: input once its bytes left for the engine's socket (a resize travels on another
// connection to the engine, so bytes still in svcd's buffer could otherwise arrive after it),
// a resize once the engine answered. A process that does not read its stdin would hold its lane
// forever: a signal entering the lane hurries the input ahead of it (its bytes stay queued, in
// order, but the signal does not wait for them), so it can always be stopped; and the steps
// waiting in one lane are bounded.
import type { Writable } from 'node:stream';
import { PROCESS_REFUSED } from '../../protocol/processes.ts';
import { KeyedQueue } from '../../shared/concurrency.ts';

/** Control steps waiting or running for one process; one more is refused. */
export const MAX_LANE_STEPS = 256;

interface Lane {
  steps: number;
  /** Signals in the lane not yet run: while there is one, input ahead of it does not wait. */
  urgent: number;
  /** Resolved while a signal waits: the input ahead of it stops waiting for its flush. */
  hurry: Promise<void>;
  hurried: () => void;
}

function calm(l: Lane): void {
  l.hurry = new Promise<void>((r) => {
    l.hurried = r;
  });
}

export class ControlLanes {
  #queue = new KeyedQueue();
  #lanes = new Map<string, Lane>();

  /**
   * Runs `step` once every earlier step of `key` is done. `urgent` (a signal): the input ahead of
   * it stops waiting for its bytes to reach the engine. The step gets the promise that says so.
   */
  async run<T>(key: string, urgent: boolean, step: (hurry: Promise<void>) => Promise<T>): Promise<T> {
    let l = this.#lanes.get(key);
    if (!l) {
      l = { steps: 0, urgent: 0, hurry: Promise.resolve(), hurried: () => {} };
      calm(l);
      this.#lanes.set(key, l);
    }
    if (l.steps >= MAX_LANE_STEPS)
      throw new Error(`${PROCESS_REFUSED}: ${MAX_LANE_STEPS} control messages are waiting already`);
    const lane = l;
    lane.steps++;
    if (urgent) {
      lane.urgent++;
      lane.hurried();
    }
    try {
      return await this.#queue.run(key, () => {
        // Its turn: the input after it waits for its own bytes again (unless another signal waits).
        if (urgent && --lane.urgent === 0) calm(lane);
        return step(lane.hurry);
      });
    } finally {
      if (--lane.steps === 0 && this.#lanes.get(key) === lane) this.#lanes.delete(key);
    }
  }

  /** Lanes with a step waiting or running (tests). */
  get size(): number {
    return this.#lanes.size;
  }
}

/**
 * Writes `data` and resolves once it left for the socket (its callback: written, or the stream
 * failed or closed, which ends the wait the same way), or once `hurry` resolves.
 */
export function written(stream: Writable, data: Buffer, hurry: Promise<void>): Promise<void> {
  const flushed = new Promise<void>((resolve) => {
    stream.write(data, () => resolve());
  });
  return Promise.race([flushed, hurry]);
}
