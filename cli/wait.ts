// Watching a deployment (`--wait`, `deployment watch`): polls GET /v1/deployments/{id}, first after
// 50 ms, then twice as long each time up to every 700 ms (a snapshot or a fork ends in a fraction
// of a second: a fixed 700 ms made it look 3x slower than it was), prints one line per phase as it finishes (name, status, duration, the evidence's key
// facts), then `deployment <id>: <status>`. On a terminal the running phase is a live spinner line
// redrawn with a carriage return; on a pipe only the plain lines are written.
import type { PhaseRecord, StartedBody } from '../protocol/api.ts';
import { sleep } from '../shared/concurrency.ts';
import type { Output } from './command.ts';
import { CliError } from './errors.ts';
import type { Client } from './http.ts';

export const POLL_MS = 700;
const FIRST_POLL_MS = 50;

/** The wait before poll number `n` (0-based): 50, 100, 200, 400, then 700 ms. */
export function pollDelay(n: number): number {
  return Math.min(POLL_MS, FIRST_POLL_MS * 2 ** Math.min(n, 10));
}
const SPIN_MS = 100;
const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const FINAL_PHASE = new Set(['ok', 'failed', 'skipped']);
const FINAL_DEPLOYMENT = new Set(['succeeded', 'failed', 'rolled_back']);
const VALUE_CHARS = 60;

/** What GET /v1/deployments/{id} answers (protocol/api.ts). */
type DeploymentView = StartedBody;

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

const clip = (s: string) => {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > VALUE_CHARS ? `${one.slice(0, VALUE_CHARS - 1)}…` : one;
};

function formatValue(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return clip(v);
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return v.length === 0 ? '[]' : clip(v.map((x) => formatValue(x)).join(','));
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return '{}';
  return clip(entries.map(([k, x]) => `${k}:${typeof x === 'object' ? JSON.stringify(x) : x}`).join(','));
}

/** `key=value` for every evidence key, short enough to read on one line. */
export function evidenceFacts(evidence: Record<string, unknown> | null): string {
  if (!evidence || typeof evidence !== 'object') return '';
  return Object.entries(evidence)
    .map(([k, v]) => `${k}=${formatValue(v)}`)
    .join(' ');
}

export function phaseLine(p: PhaseRecord): string {
  const timed = p.StartedAt && p.FinishedAt && p.Status !== 'skipped';
  const took = timed
    ? formatDuration(Date.parse(p.FinishedAt as string) - Date.parse(p.StartedAt as string))
    : '-';
  const facts = evidenceFacts(p.Evidence);
  const error = p.Error ? `error: ${clip(p.Error)}` : '';
  const tail = [facts, error].filter(Boolean).join('  ');
  return `  ${p.Name.padEnd(10)} ${p.Status.padEnd(8)} ${took.padStart(7)}${tail ? `  ${tail}` : ''}`.trimEnd();
}

/** The lines after the phases: what the user came for (reward, new env, new version). */
export function resultLines(v: DeploymentView): string[] {
  const d = v.deployment;
  const lines: string[] = [];
  if (d.Kind === 'verify') {
    const ev = v.phases.find((p) => p.Name === 'verdict')?.Evidence ?? {};
    const reward = ev.reward ?? 'none';
    lines.push(`reward: ${String(reward)}${ev.source ? ` (source ${ev.source})` : ''}`);
  }
  if (d.Status === 'succeeded' && d.Kind === 'fork') lines.push(`environment: ${d.EnvID}`);
  if (d.Status === 'succeeded' && (d.Kind === 'snapshot' || d.Kind === 'deploy') && d.VersionID)
    lines.push(`version: ${d.VersionID}`);
  lines.push(`deployment ${d.ID}: ${d.Status}`);
  return lines;
}

class Spinner {
  #io: Output;
  #timer: NodeJS.Timeout | undefined;
  #frame = 0;
  #label = '';
  #since = 0;
  #shown = false;

  constructor(io: Output) {
    this.#io = io;
  }

  show(label: string): void {
    if (!this.#io.tty) return;
    if (label !== this.#label) this.#since = Date.now();
    this.#label = label;
    this.#timer ??= setInterval(() => this.#draw(), SPIN_MS);
    this.#draw();
  }

  #draw(): void {
    const frame = FRAMES[this.#frame++ % FRAMES.length];
    this.#io.out(`\r\x1b[2K${frame} ${this.#label} ${formatDuration(Date.now() - this.#since)}`);
    this.#shown = true;
  }

  clear(): void {
    if (this.#shown) this.#io.out('\r\x1b[2K');
    this.#shown = false;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.clear();
  }
}

/** One poll; once the deployment is known, a failure says the deployment itself goes on. */
async function poll(client: Client, id: string, started: boolean): Promise<DeploymentView> {
  try {
    return await client.call('get', '/v1/deployments/{dep}', { path: { dep: id } });
  } catch (err) {
    if (!started || !(err instanceof CliError)) throw err;
    throw new CliError(`${err.message} (the deployment goes on: svc deployment watch ${id})`);
  }
}

/** Polls until the deployment ends; returns the exit code (1 when it failed or rolled back). */
export async function watchDeployment(client: Client, io: Output, id: string): Promise<number> {
  const spinner = new Spinner(io);
  const onSigint = () => {
    spinner.stop();
    io.err(`svc: stopped watching; the deployment goes on: svc deployment watch ${id}\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSigint);
  try {
    let printed = 0;
    let header = false;
    for (let polls = 0; ; polls++) {
      const v = await poll(client, id, header);
      const d = v.deployment;
      if (!header) {
        io.out(`${d.Kind} ${d.ID} on ${d.EnvID}\n`);
        header = true;
      }
      // A record without FinishedAt (absent or null) has not finished: only a value ends it.
      const done = FINAL_DEPLOYMENT.has(d.Status) || (d.FinishedAt ?? null) !== null;
      // Phases run in order: print each once it is final, never ahead of an earlier one.
      while (printed < v.phases.length && (done || FINAL_PHASE.has(v.phases[printed].Status))) {
        spinner.clear();
        io.out(`${phaseLine(v.phases[printed])}\n`);
        printed++;
      }
      if (done) {
        spinner.stop();
        for (const line of resultLines(v)) io.out(`${line}\n`);
        if (d.Status === 'succeeded') return 0;
        const what = d.Status === 'rolled_back' ? 'failed and was rolled back' : d.Status;
        io.err(`svc: ${d.Kind} ${what}${d.Error ? `: ${d.Error}` : ''}\n`);
        return 1;
      }
      const current = v.phases[printed];
      spinner.show(current ? `${current.Name} ${current.Status}` : d.Status);
      await sleep(pollDelay(polls));
    }
  } finally {
    spinner.stop();
    process.off('SIGINT', onSigint);
  }
}
