// The hub benchmark's printed report: one block of rows per run, then the comparison with the
// issue's goals (10,000 hosts under 1 GiB RSS; p99 under 20 ms at 2,000 commands/s).
import type { LoadFigures, Usage } from './measure.ts';
import type { Probe } from './probe.ts';

export interface LoadResult {
  figures: LoadFigures;
  /** Event-loop stalls and GC pauses of the control plane over the window. */
  probe: Probe;
  /** The same of the simulated sidecars' process: a stall there delays every answer in it. */
  sidecarsProbe: Probe;
  /** The same of the load generator, when it is not the control plane. */
  generatorProbe: Probe | null;
  /** The control plane process. */
  server: Usage;
  sidecarsCpuPct: number;
  /** The Postgres cluster (postmaster and backends), when the run uses it. */
  pgCpuPct: number | null;
  /** The process generating the load, when it is not the control plane. */
  generatorCpuPct: number | null;
  generatorRunqPct: number | null;
}

export interface RunResult {
  db: string;
  hosts: number;
  run: number;
  rate: number;
  envs: number;
  baselineRss: number;
  mintMs: number;
  join: { ms: number; p50: number; p99: number; failed: number; errors: Record<string, number> };
  idle: { server: Usage; sidecarsCpuPct: number; pgCpuPct: number | null; probe: Probe };
  envsMs: number;
  http: LoadResult;
  reconnect: { ms: number; p99: number; failed: number };
  hub: LoadResult;
  drops: number;
}

export const RSS_GOAL_MIB = 1024;
export const P99_GOAL_MS = 20;
export const GOAL_HOSTS = 10_000;

const f0 = (n: number) => n.toFixed(0);
/** CPU time per answered command, µs: what bounds the rate a machine can take, whatever the noise. */
const perCommand = (cpuPct: number, rate: number) => (rate > 0 ? (cpuPct * 10_000) / rate : 0);
const f1 = (n: number) => n.toFixed(1);
const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

function loadRow(name: string, l: LoadResult): string[] {
  const f = l.figures;
  return [
    name,
    `${f0(f.achievedRate)}/s`,
    f1(f.p50),
    f1(f.p90),
    f1(f.p99),
    f0(f.max),
    `${f.errors}`,
    f0(l.server.cpuPct),
    f0(l.server.runqPct),
    f0(perCommand(l.server.cpuPct, f.achievedRate)),
    l.pgCpuPct === null ? '-' : f0(l.pgCpuPct),
    l.pgCpuPct === null ? '-' : f0(perCommand(l.pgCpuPct, f.achievedRate)),
    `${f0(l.server.rssEnd)} (max ${f0(l.server.rssMax)})`,
    f0(l.sidecarsCpuPct),
    l.generatorCpuPct === null ? 'in server' : f0(l.generatorCpuPct),
    f1(f.lagP99),
    f0(l.generatorRunqPct ?? l.server.runqPct),
  ];
}

const HEADER = [
  'phase',
  'rate',
  'p50 ms',
  'p90 ms',
  'p99 ms',
  'max ms',
  'errors',
  'cp CPU%',
  'cp runq%',
  'cp µs/cmd',
  'pg CPU%',
  'pg µs/cmd',
  'cp RSS MiB',
  'sidecars CPU%',
  'loadgen CPU%',
  'sched lag p99',
  'loadgen runq%',
];

function table(rows: string[][]): string {
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c])).join('  ')).join('\n');
}

export function formatRun(r: RunResult): string {
  const idle = r.idle;
  const lines = [
    `== ${r.db}, ${r.hosts} hosts, run ${r.run}: ${r.envs} environments on distinct hosts, ${r.rate} commands/s ==`,
    `control plane RSS before any host: ${f0(r.baselineRss)} MiB`,
    `mint ${r.hosts} join tokens: ${sec(r.mintMs)}; join all: ${sec(r.join.ms)} (per host p50 ${f0(r.join.p50)} ms, p99 ${f0(r.join.p99)} ms, failed ${r.join.failed})${errs(r.join.errors)}`,
    `idle with heartbeats: cp CPU ${f1(idle.server.cpuPct)}% (runq ${f1(idle.server.runqPct)}%), RSS ${f0(idle.server.rssEnd)} MiB (max ${f0(idle.server.rssMax)}); sidecars CPU ${f1(idle.sidecarsCpuPct)}%${idle.pgCpuPct === null ? '' : `; pg CPU ${f1(idle.pgCpuPct)}%`}`,
    `create ${r.envs} environments: ${sec(r.envsMs)}; after restart, all hosts reconnected in ${sec(r.reconnect.ms)} (p99 ${f0(r.reconnect.p99)} ms, failed ${r.reconnect.failed}); streams dropped by the control plane: ${r.drops}`,
    table([HEADER, loadRow('HTTP exec', r.http), loadRow('hub dispatch', r.hub)]),
  ];
  lines.push(`idle: ${stalls(idle.probe)}`);
  for (const [name, l] of [
    ['HTTP exec', r.http],
    ['hub dispatch', r.hub],
  ] as const) {
    lines.push(`${name}: ${stalls(l.probe)}`);
    const others = [`sidecars ${brief(l.sidecarsProbe)}`];
    if (l.generatorProbe) others.push(`load generator ${brief(l.generatorProbe)}`);
    lines.push(`${name}, the other processes: ${others.join('; ')}`);
    if (l.figures.errors) lines.push(`${name} errors: ${JSON.stringify(l.figures.errorKinds)}`);
  }
  return lines.join('\n');
}

function stalls(p: Probe): string {
  const flush = p.flushes
    ? `; heartbeat flushes ${p.flushes.count}, longest ${f0(p.flushes.maxMs)} ms, total ${f0(p.flushes.totalMs)} ms`
    : '';
  return (
    `control plane event-loop stall p99 ${f1(p.loopP99)} ms, max ${f0(p.loopMax)} ms; ` +
    `GC ${p.gcCount} pauses, ${f0(p.gcMs)} ms in all, longest ${f1(p.gcMaxMs)} ms, ${p.majorGcs} full${flush}; ` +
    `memory: JS heap ${p.memory.heapUsed} of ${p.memory.heapTotal} MiB, external ${p.memory.external} MiB`
  );
}

/** Stalls and pauses of a process that is not the control plane: what its share of the tail can be. */
function brief(p: Probe): string {
  return `event-loop stall p99 ${f1(p.loopP99)} ms, max ${f0(p.loopMax)} ms, GC longest ${f1(p.gcMaxMs)} ms (${p.majorGcs} full)`;
}

function errs(e: Record<string, number>): string {
  return Object.keys(e).length ? ` errors: ${JSON.stringify(e)}` : '';
}

export const LEGEND = `columns: rate = answered per second; p50..max = round trip from send to answer, ms;
cp = control plane process (CPU% of one core; runq% = share of the window it was ready but had no
CPU: the machine's other load, so latency under high runq is noise); µs/cmd = CPU per answered
command; pg = Postgres postmaster and backends; loadgen = the process sending the load (for hub
dispatch it is the control plane itself); sched lag = how late the load generator sent, ms.`;

/** One line per database for the goal size: best and worst run against each goal. */
export function formatGoals(results: RunResult[], rate: number): string {
  const out = [
    `== goals: ${GOAL_HOSTS} hosts under ${RSS_GOAL_MIB} MiB RSS; round trip p99 under ${P99_GOAL_MS} ms at ${rate} commands/s ==`,
  ];
  for (const db of [...new Set(results.map((r) => r.db))]) {
    const at = results.filter((r) => r.db === db && r.hosts === GOAL_HOSTS);
    if (at.length === 0) {
      out.push(`${db}: no run at ${GOAL_HOSTS} hosts`);
      continue;
    }
    const rss = at.map((r) => Math.max(r.idle.server.rssMax, r.http.server.rssMax, r.hub.server.rssMax));
    out.push(
      `${db}: RSS max ${range(rss)} MiB ${verdict(Math.max(...rss) < RSS_GOAL_MIB)}; ` +
        `${latencyVerdict(
          'HTTP exec',
          at.map((r) => r.http.figures),
          rate,
        )}; ` +
        latencyVerdict(
          'hub dispatch',
          at.map((r) => r.hub.figures),
          rate,
        ),
    );
  }
  return out.join('\n');
}

/** p99 over the runs (best..worst), and whether every run held the rate without errors under the goal. */
function latencyVerdict(name: string, runs: LoadFigures[], rate: number): string {
  const p99 = runs.map((f) => f.p99);
  const slow = runs.filter((f) => f.achievedRate < 0.98 * rate || f.errors > 0);
  const why = slow.length
    ? ` (rate not held: ${slow.map((f) => `${f0(f.achievedRate)}/s, ${f.errors} errors`).join('; ')})`
    : '';
  return `${name} p99 ${range(p99)} ms ${verdict(Math.max(...p99) < P99_GOAL_MS && slow.length === 0)}${why}`;
}

function range(xs: number[]): string {
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return xs.length > 1 ? `${f1(lo)}..${f1(hi)}` : f1(lo);
}

const verdict = (ok: boolean) => (ok ? 'MEETS' : 'MISSES');
