// "Nothing a request does may kill a process": a test that checks a bound (a drain, a timeout, a
// sweep, a retry) also checks that the process still answers once the bound has passed, since a
// throw in the timer that enforces a bound only surfaces when that timer fires.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { stackOf } from '../../shared/faults.ts';

export interface AliveWatch {
  /**
   * Lets `boundMs` pass (see assertAliveAfter), ends the watch, and asserts that nothing was
   * thrown to this process since the watch began.
   */
  assertNothingEscapedAfter(boundMs: number): Promise<void>;
  /**
   * Lets `boundMs` pass, so every timer armed before with a bound up to it has fired (Node runs
   * due timers in the order they fall due), ends the watch, then asserts that nothing was thrown
   * to this process since the watch began (the test runner catches it; a program would have
   * exited), that `child` (when given) still runs, and that `url` answers `GET /health` with 200.
   */
  assertAliveAfter(url: string, boundMs: number, child?: ChildProcess): Promise<void>;
}

/** Starts watching for throws that would kill a program: call it before the bound is armed. */
export function watchAlive(): AliveWatch {
  const escaped: unknown[] = [];
  const note = (err: unknown) => escaped.push(err);
  process.on('uncaughtException', note);
  process.on('unhandledRejection', note);
  const watch: AliveWatch = {
    async assertNothingEscapedAfter(boundMs) {
      try {
        await sleep(boundMs);
        // One more turn of the loop: callbacks the bound's timer scheduled run before the check.
        await new Promise((r) => setImmediate(r));
      } finally {
        process.off('uncaughtException', note);
        process.off('unhandledRejection', note);
      }
      assert.deepEqual(escaped.map(stackOf), [], 'nothing was thrown that would have killed the process');
    },
    async assertAliveAfter(url, boundMs, child) {
      await watch.assertNothingEscapedAfter(boundMs);
      if (child) assert.equal(child.exitCode ?? child.signalCode, null, 'the process is still running');
      const r = await fetch(`${url}/health`);
      assert.equal(r.status, 200, `${url} still answers /health once ${boundMs} ms have passed`);
    },
  };
  return watch;
}

/** `watchAlive().assertAliveAfter(…)`, for a bound armed by what the test awaited just before. */
export function assertAliveAfter(url: string, boundMs: number, child?: ChildProcess): Promise<void> {
  return watchAlive().assertAliveAfter(url, boundMs, child);
}
