// The soak's summary: a table per operation, the processes' trends and exits, the end state, and
// the goals met or not; the same as JSON under bench/soak/results/.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EndState } from './checks.ts';
import type { Exit, Sample, Trend } from './plane.ts';
import type { OpSummary } from './record.ts';

export interface Result {
  dialect: string;
  startedAt: string;
  minutes: number;
  warmupMin: number;
  loadAvg: { start: number[]; end: number[] };
  ops: OpSummary[];
  sseEvents: number;
  trends: { server: Trend; svcd: Trend };
  /** Every RSS/fd sample of both processes (minutes from the start). */
  samples: Sample[];
  exits: Exit[];
  end: EndState | { error: string };
  goals: Record<string, boolean>;
  log: string;
}

const pad = (s: string | number, n: number) => String(s).padEnd(n);
const lpad = (s: string | number, n: number) => String(s).padStart(n);

export function goals(r: Omit<Result, 'goals'>): Record<string, boolean> {
  const unexpected5xx = r.ops.reduce((n, o) => n + (o.outcomes['unexpected-5xx'] ?? 0), 0);
  const end = 'error' in r.end ? null : r.end;
  return {
    'control plane and svcd never exited': r.exits.length === 0,
    'no unexpected 5xx': unexpected5xx === 0,
    'no other unexpected answer': r.ops.every((o) =>
      Object.entries(o.outcomes).every(
        ([k, v]) => !k.startsWith('unexpected') || k === 'unexpected-5xx' || !v,
      ),
    ),
    'every deployment ended': end !== null && end.stuck.length === 0,
    'every environment destroyed': end !== null && end.notDestroyed.length === 0,
    'nothing left on the host': end !== null && end.left.length === 0,
  };
}

export function format(r: Result): string {
  const out: string[] = [];
  out.push(`soak on ${r.dialect}: ${r.minutes} min from ${r.startedAt}, warm-up ${r.warmupMin} min`);
  out.push(
    `load average (1/5/15) at start ${r.loadAvg.start.map((v) => v.toFixed(2)).join(' ')}, at end ${r.loadAvg.end.map((v) => v.toFixed(2)).join(' ')}`,
  );
  out.push('');
  out.push(
    `${pad('operation', 26)}${pad('kind', 8)}${lpad('count', 7)}${lpad('ok/exp', 8)}${lpad('unexp', 7)}  ${pad('p50 ms', 8)}${pad('p99 ms', 8)}${pad('max ms', 8)} statuses`,
  );
  for (const o of r.ops) {
    const good = (o.outcomes.ok ?? 0) + (o.outcomes.expected ?? 0);
    const bad = o.count - good;
    const statuses = Object.entries(o.statuses)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 5)
      .map(([s, n]) => `${s}×${n}`)
      .join(' ');
    out.push(
      `${pad(o.op, 26)}${pad(o.kind, 8)}${lpad(o.count, 7)}${lpad(good, 8)}${lpad(bad || '', 7)}  ${pad(o.p50Ms, 8)}${pad(o.p99Ms, 8)}${pad(o.maxMs, 8)} ${statuses}`,
    );
  }
  const examples = r.ops.flatMap((o) => o.examples.map((e) => `  ${o.op}: ${e}`));
  if (examples.length) out.push('', 'unexpected answers (first few per operation):', ...examples);
  out.push('', `event-stream followers received ${r.sseEvents} events`);
  out.push('', 'process trends from warm-up to the end of the load (linear fit):');
  for (const [name, t] of Object.entries(r.trends))
    out.push(
      `  ${pad(name, 11)} pid ${pad(t.pid ?? '-', 8)} RSS ${t.rssStartMiB} → ${t.rssEndMiB} MiB (max ${t.rssMaxMiB}), ${t.rssMiBPerMin} MiB/min; fds ${t.fdsStart} → ${t.fdsEnd}, ${t.fdsPerMin} fds/min (${t.samples} samples)`,
    );
  if (r.exits.length) {
    out.push('', 'EXITS:');
    for (const e of r.exits)
      out.push(
        `  ${e.proc} pid ${e.pid} at +${e.atMin.toFixed(1)} min: ${e.how}`,
        ...e.lastLog.split('\n').map((l) => `    | ${l.slice(0, 300)}`),
      );
  }
  out.push('', 'end state:');
  if ('error' in r.end) out.push(`  not checked: ${r.end.error}`);
  else {
    out.push(`  ${r.end.environments} environments, ${r.end.deployments} deployments over the run`);
    out.push(`  stuck deployments: ${r.end.stuck.length ? r.end.stuck.join(', ') : 'none'}`);
    out.push(
      `  environments not destroyed: ${r.end.notDestroyed.length ? r.end.notDestroyed.join(', ') : 'none'}`,
    );
    out.push(
      `  left on the host: ${r.end.left.length ? '' : 'nothing'}`,
      ...r.end.left.map((l) => `    ${l}`),
    );
  }
  out.push('', 'goals:');
  for (const [g, ok] of Object.entries(r.goals)) out.push(`  ${ok ? 'MET   ' : 'FAILED'} ${g}`);
  out.push(`  (RSS and fd slopes are reported above; judge "flat" against the run length and warm-up)`);
  out.push('', `control plane log: ${r.log}`);
  return out.join('\n');
}

/** bench/soak/results/<dialect>-<start time>.<ext> (the folder is made if missing). */
export function resultPath(dialect: string, startedAt: string, ext: string): string {
  const dir = new URL('./results/', import.meta.url).pathname;
  mkdirSync(dir, { recursive: true });
  return join(dir, `${dialect}-${startedAt.replace(/[:.]/g, '-')}.${ext}`);
}

export function save(r: Result): string {
  const file = resultPath(r.dialect, r.startedAt, 'json');
  writeFileSync(file, `${JSON.stringify(r, null, 2)}\n`);
  return file;
}
