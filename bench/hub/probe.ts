// Preloaded into the control plane and the simulated sidecars by the hub benchmark
// (NODE_OPTIONS=--import), and used in-process by the load generator, so each process can say how
// much of the latency tail is its own: event-loop stalls and garbage collection pauses over a
// window the benchmark opens and closes (over the IPC channel for a child).
// The benchmark's own harness (hub-server.ts) also times the hub's heartbeat flushes.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

export interface Probe {
  op: 'probe';
  /** Event-loop stalls p99 and max, ms: how late a 10 ms timer ran. */
  loopP99: number;
  loopMax: number;
  gcCount: number;
  gcMs: number;
  gcMaxMs: number;
  /** Mark-compact (full) collections among them. */
  majorGcs: number;
  /** process.memoryUsage() at the end of the window, MiB: what the RSS is made of. */
  memory: { heapUsed: number; heapTotal: number; external: number; arrayBuffers: number };
  /** Heartbeat flushes (hub-server.ts only): how many, longest and total time, ms. */
  flushes?: { count: number; maxMs: number; totalMs: number };
}

export type ToProbe = { op: 'probe-start' } | { op: 'probe-stop' };

/** Set by hub-server.ts, which can see the hub: the flush timings of the current window. */
export const flushTimes = { count: 0, maxMs: 0, totalMs: 0, on: false };

const MAJOR = 4;
/** The delay monitor's timer period; its samples include it, so it is taken off. */
const RESOLUTION_MS = 10;
const stall = (ns: number) => Math.max(0, ns / 1e6 - RESOLUTION_MS); // perf_hooks constants.NODE_PERFORMANCE_GC_MAJOR

let loop: ReturnType<typeof monitorEventLoopDelay> | null = null;
let gc = { count: 0, ms: 0, maxMs: 0, major: 0 };
const observer = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.count++;
    gc.ms += e.duration;
    gc.maxMs = Math.max(gc.maxMs, e.duration);
    if ((e as unknown as { detail?: { kind?: number } }).detail?.kind === MAJOR) gc.major++;
  }
});

function memoryMiB(): Probe['memory'] {
  const m = process.memoryUsage();
  const mib = (b: number) => Math.round(b / 1048576);
  return {
    heapUsed: mib(m.heapUsed),
    heapTotal: mib(m.heapTotal),
    external: mib(m.external),
    arrayBuffers: mib(m.arrayBuffers),
  };
}

/** Opens a window: stalls, GC pauses and flushes are counted from now. */
export function startProbe(): void {
  loop = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  loop.enable();
  gc = { count: 0, ms: 0, maxMs: 0, major: 0 };
  observer.observe({ entryTypes: ['gc'] });
  Object.assign(flushTimes, { count: 0, maxMs: 0, totalMs: 0, on: true });
}

/** Closes the window opened by startProbe and returns what it saw; null if none is open. */
export function stopProbe(): Probe | null {
  if (!loop) return null;
  loop.disable();
  observer.disconnect();
  flushTimes.on = false;
  const probe: Probe = {
    op: 'probe',
    loopP99: stall(loop.percentile(99)),
    loopMax: stall(loop.max),
    gcCount: gc.count,
    gcMs: gc.ms,
    gcMaxMs: gc.maxMs,
    majorGcs: gc.major,
    memory: memoryMiB(),
    ...(flushTimes.count ? { flushes: { ...flushTimes } } : {}),
  };
  loop = null;
  return probe;
}

// Preloaded into a child (--import), the benchmark opens and closes the window over IPC.
process.on('message', (m: ToProbe) => {
  if (m?.op === 'probe-start') startProbe();
  else if (m?.op === 'probe-stop') {
    const probe = stopProbe();
    if (probe) process.send?.(probe);
  }
});
