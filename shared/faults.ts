// A throw in a timer callback, an event handler or a stream's error path has no caller to take
// it: Node treats it as uncaught and exits, and every request and deployment in flight dies with
// the process. `guard()` wraps such a callback so a throw (or a rejected promise it returns) is
// reported instead; `Faults`, built by each program in its own context, logs every report with its
// stack, counts it by kind, and catches what no guard did at the process level. It imports
// nothing of the project, so the server and the sidecar both use it.
import { channel } from 'node:diagnostics_channel';

/** `callback`: caught by a guard; the others: caught by the process-level handlers. */
export const FAULT_KINDS = ['callback', 'uncaughtException', 'unhandledRejection'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface Fault {
  kind: FaultKind;
  /** What was running: a guard's name, or the process event. */
  where: string;
  error: unknown;
}

/** Guards publish here; each program's Faults subscribes. A publish without subscriber is cheap. */
const reported = channel('svc:fault');

/** The error's stack, or its text when it is not an Error. */
export function stackOf(error: unknown): string {
  return error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error);
}

/** Reports a fault a caller caught itself (an `error` event with nobody else to tell). */
export function reportFault(where: string, error: unknown, kind: FaultKind = 'callback'): void {
  const fault: Fault = { kind, where, error };
  // Outside a program (a library use, a unit test) nobody subscribes: stderr still says it.
  if (reported.hasSubscribers) reported.publish(fault);
  else process.stderr.write(`fault in ${where}: ${stackOf(error)}\n`);
}

/**
 * `fn` as a callback whose throw, or whose returned promise's rejection, is reported as a fault
 * named `where` instead of escaping to the event loop.
 */
export function guard<A extends unknown[]>(where: string, fn: (...args: A) => unknown): (...args: A) => void {
  return (...args: A) => {
    try {
      const r = fn(...args);
      if (r instanceof Promise) r.catch((err: unknown) => reportFault(where, err));
    } catch (err) {
      reportFault(where, err);
    }
  };
}

export interface FaultOptions {
  /** One line per fault, with its stack. */
  log: (line: string) => void;
  /**
   * Why continuing after this fault would be unsafe, or null to keep running. The default exits on
   * Node's own internal assertions and on a storm (see `stormLimit`).
   */
  unsafe?: (fault: Fault) => string | null;
  /** Uncaught faults within one minute after which the process counts as failing in a loop. */
  stormLimit?: number;
}

/** Node failing its own internal checks: its state can no longer be trusted. */
const NODE_INTERNAL = new Set(['ERR_INTERNAL_ASSERTION']);

/** One program's faults: logged, counted by kind, and the process-level safety net. */
export class Faults {
  readonly #counts = new Map<FaultKind, number>(FAULT_KINDS.map((k) => [k, 0]));
  readonly #opts: FaultOptions;
  readonly #recent: number[] = [];
  readonly #onReport = (m: unknown) => this.record(m as Fault);

  constructor(opts: FaultOptions) {
    this.#opts = opts;
    reported.subscribe(this.#onReport);
  }

  /** Faults so far by kind (every kind present, 0 when none). */
  counts(): ReadonlyMap<FaultKind, number> {
    return this.#counts;
  }

  /** Logs and counts one fault; returns why the process must stop, or null. */
  record(fault: Fault): string | null {
    const n = (this.#counts.get(fault.kind) ?? 0) + 1;
    this.#counts.set(fault.kind, n);
    this.#opts.log(`${fault.kind} (${n} so far) in ${fault.where}: ${stackOf(fault.error)}`);
    if (fault.kind === 'callback') return null;
    const now = Date.now();
    this.#recent.push(now);
    while (this.#recent.length && this.#recent[0] < now - 60_000) this.#recent.shift();
    const limit = this.#opts.stormLimit ?? 100;
    if (this.#recent.length > limit)
      return `${this.#recent.length} uncaught errors within a minute: the process is failing in a loop`;
    const code = (fault.error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && NODE_INTERNAL.has(code))
      return `Node reported an internal failure (${code}): its state cannot be trusted`;
    return this.#opts.unsafe?.(fault) ?? null;
  }

  /**
   * Catches what no guard did: logged with its stack and counted, and the process keeps running;
   * `exit(reason)` is called only when continuing would be unsafe. Returns the uninstall.
   */
  installProcessHandlers(proc: NodeJS.Process, exit: (reason: string) => void): () => void {
    const on = (kind: FaultKind) => (error: unknown) => {
      const reason = this.record({ kind, where: 'process', error });
      if (reason) exit(reason);
    };
    const onException = on('uncaughtException');
    const onRejection = on('unhandledRejection');
    proc.on('uncaughtException', onException);
    proc.on('unhandledRejection', onRejection);
    return () => {
      proc.off('uncaughtException', onException);
      proc.off('unhandledRejection', onRejection);
    };
  }

  close(): void {
    reported.unsubscribe(this.#onReport);
  }
}
