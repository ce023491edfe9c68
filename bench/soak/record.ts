// What the soak saw, per operation: counts by outcome class, latency, and a few examples of each
// unexpected class. Honest work expects 2xx; each hostile input says which answers it expects
// (a 4xx, a 429 or 503 refusal, a closed connection). Anything else is unexpected, and a 5xx is
// always unexpected.
import { pct } from '../hub/measure.ts';
import type { Answer } from './http.ts';

export type Kind = 'work' | 'hostile';

/** ok: what honest work wants; expected: an answer a hostile input may get (mostly refusals). */
export type Outcome =
  | 'ok'
  | 'expected'
  | 'unexpected-5xx'
  | 'unexpected-4xx'
  | 'unexpected-2xx'
  | 'unexpected-timeout'
  | 'unexpected-network'
  | 'unexpected-other';

interface OpStats {
  kind: Kind;
  count: number;
  outcomes: Partial<Record<Outcome, number>>;
  statuses: Record<string, number>;
  latencies: number[];
  examples: string[];
}

export interface OpSummary {
  op: string;
  kind: Kind;
  count: number;
  outcomes: Partial<Record<Outcome, number>>;
  statuses: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  examples: string[];
}

const EXAMPLES = 5;

/** The class of an answer; `expected` says which non-2xx answers a hostile input may get. */
export function classify(kind: Kind, a: Answer, expected: (a: Answer) => boolean): Outcome {
  if (kind === 'hostile' && expected(a)) return 'expected';
  if (a.status >= 500) return 'unexpected-5xx';
  if (a.status >= 200 && a.status < 300) return kind === 'work' ? 'ok' : 'unexpected-2xx';
  if (a.status >= 400) return 'unexpected-4xx';
  if (a.error === 'timeout') return 'unexpected-timeout';
  if (a.error) return 'unexpected-network';
  return 'unexpected-other';
}

export class Recorder {
  #ops = new Map<string, OpStats>();
  #t0 = Date.now();

  /** Records one answer; returns its class. */
  add(op: string, kind: Kind, a: Answer, expected: (a: Answer) => boolean = () => false): Outcome {
    const o = classify(kind, a, expected);
    this.note(op, kind, o, a.ms, `${a.status || a.error} ${a.text.slice(0, 200)}`);
    return o;
  }

  /** Records an outcome measured some other way (a deployment's end, a stream's close code). */
  note(op: string, kind: Kind, o: Outcome, ms: number, detail: string): void {
    let s = this.#ops.get(op);
    if (!s) {
      s = { kind, count: 0, outcomes: {}, statuses: {}, latencies: [], examples: [] };
      this.#ops.set(op, s);
    }
    s.count++;
    s.outcomes[o] = (s.outcomes[o] ?? 0) + 1;
    const st = detail.split(' ', 1)[0];
    s.statuses[st] = (s.statuses[st] ?? 0) + 1;
    s.latencies.push(ms);
    if (o.startsWith('unexpected') && s.examples.length < EXAMPLES) {
      const at = ((Date.now() - this.#t0) / 60_000).toFixed(1);
      s.examples.push(`+${at} min ${o}: ${detail.replace(/\s+/g, ' ').slice(0, 300)}`);
    }
  }

  unexpected(): number {
    let n = 0;
    for (const s of this.#ops.values())
      for (const [o, c] of Object.entries(s.outcomes)) if (o.startsWith('unexpected')) n += c ?? 0;
    return n;
  }

  summary(): OpSummary[] {
    return [...this.#ops.entries()]
      .sort(([a, x], [b, y]) => x.kind.localeCompare(y.kind) || a.localeCompare(b))
      .map(([op, s]) => {
        const sorted = Float64Array.from(s.latencies).sort();
        return {
          op,
          kind: s.kind,
          count: s.count,
          outcomes: s.outcomes,
          statuses: s.statuses,
          p50Ms: Math.round(pct(sorted, 50)),
          p99Ms: Math.round(pct(sorted, 99)),
          maxMs: Math.round(sorted.length ? sorted[sorted.length - 1] : 0),
          examples: s.examples,
        };
      });
  }
}

/** Expected refusals: any 4xx. */
export const anyClientError = (a: Answer) => a.status >= 400 && a.status < 500;
/** Expected refusals: the given statuses. */
export const statusIn =
  (...codes: number[]) =>
  (a: Answer) =>
    codes.includes(a.status);
