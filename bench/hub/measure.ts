// Measuring pieces shared by the hub benchmark's processes: an open-loop scheduler (requests go
// out on schedule whether or not earlier ones returned, so a slow server cannot slow the load
// down and hide its own latency), latency percentiles, and /proc readings of another process.
import { readdirSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

export interface LoadFigures {
  /** Requests the schedule asked for, and how many were sent, answered ok and failed. */
  planned: number;
  sent: number;
  ok: number;
  errors: number;
  /** First few distinct error texts with their counts. */
  errorKinds: Record<string, number>;
  /** Answered (ok or not) per second of the measured window. */
  achievedRate: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** How late the scheduler itself sent requests (the generator's own lag), ms. */
  lagP99: number;
  lagMax: number;
}

/** One request: resolves on success, rejects with a short reason otherwise. */
export type Fire = (i: number) => Promise<void>;

const TICK_MS = 1;

/**
 * Sends `rate * seconds` requests at their scheduled times and waits for all of them (each
 * request is bounded by the caller's own timeout). Latency is from the actual send to the answer.
 */
export async function openLoop(rate: number, seconds: number, fire: Fire): Promise<LoadFigures> {
  const planned = Math.round(rate * seconds);
  const latency = new Float64Array(planned);
  const lag = new Float64Array(planned);
  const errorKinds: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let errors = 0;
  let lastDone = 0;
  const inflight: Promise<void>[] = [];
  const start = performance.now();
  const sendOne = (i: number) => {
    const t0 = performance.now();
    lag[i] = t0 - (start + (i * 1000) / rate);
    const p = fire(i).then(
      () => {
        latency[i] = performance.now() - t0;
        ok++;
      },
      (err: unknown) => {
        latency[i] = performance.now() - t0;
        errors++;
        const k = String((err as Error)?.message ?? err).slice(0, 120);
        if (k in errorKinds || Object.keys(errorKinds).length < 8) errorKinds[k] = (errorKinds[k] ?? 0) + 1;
      },
    );
    inflight.push(
      p.then(() => {
        lastDone = performance.now();
      }),
    );
  };
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(planned, Math.floor(((performance.now() - start) * rate) / 1000) + 1);
      while (sent < due) sendOne(sent++);
      if (sent < planned) setTimeout(tick, TICK_MS);
      else resolve();
    };
    tick();
  });
  await Promise.all(inflight);
  const window = Math.max(seconds * 1000, lastDone - start);
  const sorted = Float64Array.from(latency.subarray(0, sent)).sort();
  const lags = Float64Array.from(lag.subarray(0, sent)).sort();
  return {
    planned,
    sent,
    ok,
    errors,
    errorKinds,
    achievedRate: ((ok + errors) * 1000) / window,
    p50: pct(sorted, 50),
    p90: pct(sorted, 90),
    p99: pct(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1] : 0,
    lagP99: pct(lags, 99),
    lagMax: lags.length ? lags[lags.length - 1] : 0,
  };
}

export function pct(sorted: Float64Array | number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, i)];
}

const CLK_TCK = 100; // Linux USER_HZ; /proc/<pid>/stat counts CPU time in these ticks

/** utime + stime of a process, in ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at the state, field 3.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
}

/** Resident set size of a process, in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** The process and every descendant of it (for the Postgres postmaster and its backends). */
export function processTree(root: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parentOf.set(Number(name), Number(f[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) {
    for (const [pid, ppid] of parentOf) if (ppid === tree[i]) tree.push(pid);
  }
  return tree;
}

/**
 * Growth of a per-process counter summed over a changing set of processes: each process counts
 * from its first reading in the window (0 when it started inside it) to its last, so a Postgres
 * backend that exits mid-window keeps the time it used until the last sample.
 */
class TreeCounter {
  #first = new Map<number, number>();
  #last = new Map<number, number>();
  #pids: () => number[];
  #read: (pid: number) => number;

  constructor(pids: () => number[], read: (pid: number) => number) {
    this.#pids = pids;
    this.#read = read;
    this.sample(true);
  }

  sample(initial = false): void {
    for (const pid of this.#pids()) {
      try {
        const v = this.#read(pid);
        if (!this.#first.has(pid)) this.#first.set(pid, initial ? v : 0);
        this.#last.set(pid, v);
      } catch {
        // Gone between listing and reading.
      }
    }
  }

  growth(): number {
    this.sample();
    let sum = 0;
    for (const [pid, v] of this.#last) sum += v - (this.#first.get(pid) ?? 0);
    return sum;
  }
}

/** Time the process's main thread spent runnable but waiting for a CPU, in ms (schedstat field 2). */
export function runqMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
}

export interface Usage {
  /** CPU% of one core over the window (200 = both cores of this machine). */
  cpuPct: number;
  /**
   * Share of the window the main thread was ready to run but had no CPU: the machine's other
   * load stealing time from this process (high values make latency figures noise, not verdicts).
   */
  runqPct: number;
  rssEnd: number;
  rssMax: number;
}

/** Samples a process's RSS every 250 ms and its CPU over the window from `start()` to `stop()`. */
export function watch(pid: number | (() => number[])): { stop(): Usage } {
  const pids = typeof pid === 'number' ? () => [pid] : pid;
  const rssNow = () => pids().reduce((s, p) => s + safeRss(p), 0);
  const t0 = performance.now();
  const cpu = new TreeCounter(pids, cpuMs);
  const runq = new TreeCounter(pids, runqMs);
  let rssMax = rssNow();
  const timer = setInterval(() => {
    rssMax = Math.max(rssMax, rssNow());
    cpu.sample();
    runq.sample();
  }, 250);
  return {
    stop() {
      clearInterval(timer);
      const rssEnd = rssNow();
      const ms = performance.now() - t0;
      const cpuPct = (cpu.growth() * 100) / ms;
      const runqPct = (runq.growth() * 100) / ms;
      return { cpuPct, runqPct, rssEnd, rssMax: Math.max(rssMax, rssEnd) };
    },
  };
}

function safeRss(pid: number): number {
  try {
    return rssMiB(pid);
  } catch {
    return 0;
  }
}

/** Runs `fn` with at most `limit` calls in flight; results keep their order. */
export async function pool<T, R>(
  items: T[],
  limit: number,
  fn: (t: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
