// The replicas benchmark's simulated sidecars as several processes (bench/replicas/sidecars.ts),
// seen by the benchmark as one: the hosts are cut in contiguous slices, one per process, and every
// answer is put together again in host order. One process per slice keeps each under the machine's
// open-file limit (one socket per host; the limit cannot be raised here) and lets the reconnects
// after a failover use more than one core.
import { join } from 'node:path';
import { pct } from '../hub/measure.ts';
import { type Child, nextMessage, startChild } from '../hub/proc.ts';
import type { ConnectFigures } from '../hub/sim-hosts.ts';
import type { Drops, FromSidecars, Joined, ToSidecars, Where } from './sidecars.ts';

/** Hosts per process when the count is not given: ~5,000 descriptors each, well below 20,000. */
export const HOSTS_PER_PROC = 5_000;

/** The join over every process: counts summed, percentiles over all the hosts' times. */
export type JoinFigures = Omit<ConnectFigures, 'times'>;

export interface SidecarProcs {
  procs: Child[];
  /** Each process's share of the hosts. */
  sizes: number[];
  join(urls: string[], tokens: string[], concurrency: number, timeoutMs: number): Promise<JoinFigures>;
  where(timeoutMs: number): Promise<Omit<Where, 'op'>>;
  drops(since: number, timeoutMs: number): Promise<Omit<Drops, 'op'>>;
  pids(): number[];
  stop(): Promise<void>;
}

function ask<T extends FromSidecars>(sc: Child, m: ToSidecars, op: T['op'], timeoutMs: number): Promise<T> {
  const answer = nextMessage<T>(sc, (x) => x?.op === op, timeoutMs);
  sc.proc.send(m);
  return answer;
}

function merge(into: Record<string, number>, from: Record<string, number>): void {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
}

/** Starts `count` processes for `hosts` hosts (logs `sidecars-<i>.log` in `dir`), each ready. */
export async function startSidecars(hosts: number, count: number, dir: string): Promise<SidecarProcs> {
  const n = Math.max(1, Math.min(count, hosts));
  const sizes = Array.from({ length: n }, (_, i) => Math.floor(hosts / n) + (i < hosts % n ? 1 : 0));
  const procs = sizes.map((_, i) =>
    startChild('bench/replicas/sidecars.ts', [], {}, join(dir, `sidecars-${i}.log`)),
  );
  await Promise.all(procs.map((p) => nextMessage(p, (m) => m?.op === 'ready', 30_000)));
  const firsts = sizes.map((_, i) => sizes.slice(0, i).reduce((s, x) => s + x, 0));
  return {
    procs,
    sizes,
    async join(urls, tokens, concurrency, timeoutMs) {
      const each = Math.max(1, Math.ceil(concurrency / n));
      const rs = await Promise.all(
        procs.map((p, i) =>
          ask<Joined>(
            p,
            {
              op: 'join',
              urls,
              tokens: tokens.slice(firsts[i], firsts[i] + sizes[i]),
              first: firsts[i],
              concurrency: each,
            },
            'joined',
            timeoutMs,
          ),
        ),
      );
      const times = rs.flatMap((r) => r.times).sort((a, b) => a - b);
      const errors: Record<string, number> = {};
      for (const r of rs) merge(errors, r.errors);
      return {
        ok: rs.reduce((s, r) => s + r.ok, 0),
        failed: rs.reduce((s, r) => s + r.failed, 0),
        ms: Math.max(...rs.map((r) => r.ms)),
        p50: pct(times, 50),
        p99: pct(times, 99),
        errors,
      };
    },
    async where(timeoutMs) {
      const rs = await Promise.all(procs.map((p) => ask<Where>(p, { op: 'where' }, 'where', timeoutMs)));
      return { ids: rs.flatMap((r) => r.ids), replica: rs.flatMap((r) => r.replica) };
    },
    async drops(since, timeoutMs) {
      const rs = await Promise.all(
        procs.map((p) => ask<Drops>(p, { op: 'drops', since }, 'drops', timeoutMs)),
      );
      const errors: Record<string, number> = {};
      for (const r of rs) merge(errors, r.errors);
      return {
        drops: rs.flatMap((r) => r.drops),
        open: rs.reduce((s, r) => s + r.open, 0),
        commands: rs.reduce((s, r) => s + r.commands, 0),
        errors,
      };
    },
    pids: () => procs.map((p) => p.pid),
    async stop() {
      await Promise.all(procs.map((p) => p.stop()));
    },
  };
}
