// `svc fork --count N`: one request starts N forks of one snapshot; by default the CLI then
// watches every fork's deployment at once and prints one line per fork as it ends (N interleaved
// phase tables would be unreadable), then how many succeeded. Any failed fork exits 1.
import type { ForksStartedBody } from '../protocol/api.ts';
import { sleep } from '../shared/concurrency.ts';
import type { Output } from './command.ts';
import type { Client } from './http.ts';
import { formatDuration, pollDelay } from './wait.ts';

const FINAL = new Set(['succeeded', 'failed', 'rolled_back']);

/** `--count`: a whole number; the server says what range it takes. */
export function parseCount(raw: string): number | null {
  return /^\d{1,4}$/.test(raw) ? Number(raw) : null;
}

type Fork = ForksStartedBody['forks'][number];

function line(name: string, envId: string, status: string, took: string, error: string): string {
  return `  ${name.padEnd(20)} ${envId.padEnd(30)} ${status.padEnd(9)} ${took.padStart(7)}${error ? `  error: ${error}` : ''}`.trimEnd();
}

/** Watches every started fork to its end; returns the exit code (1 when any fork failed). */
export async function watchForks(client: Client, io: Output, r: ForksStartedBody): Promise<number> {
  io.out(`fan-out ${r.fanout}: ${r.forks.length} forks of ${r.version} (snapshot ${r.snapshot})\n`);
  let failed = 0;
  const pending = new Map<string, { name: string; envId: string }>();
  for (const f of r.forks as Fork[]) {
    if ('error' in f) {
      failed++;
      io.out(`${line(f.name, '-', 'refused', '-', f.error)}\n`);
    } else if (f.deployment)
      pending.set(f.deployment.ID, { name: f.environment.Name, envId: f.deployment.EnvID });
  }
  for (let polls = 0; pending.size; polls++) {
    await sleep(pollDelay(polls));
    for (const [id, fork] of pending) {
      const v = await client.call('get', '/v1/deployments/{dep}', { path: { dep: id } });
      const d = v.deployment;
      if (!FINAL.has(d.Status) && (d.FinishedAt ?? null) === null) continue;
      pending.delete(id);
      if (d.Status !== 'succeeded') failed++;
      const took = d.FinishedAt ? formatDuration(Date.parse(d.FinishedAt) - Date.parse(d.CreatedAt)) : '-';
      io.out(`${line(fork.name, fork.envId, d.Status, took, d.Error ?? '')}\n`);
    }
  }
  const total = r.forks.length;
  io.out(`forks: ${total - failed} of ${total} succeeded\n`);
  if (!failed) return 0;
  io.err(`svc: ${failed} of ${total} forks failed\n`);
  return 1;
}
