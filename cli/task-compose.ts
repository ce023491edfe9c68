// A task folder as a compose file: a Harbor task (harbor.ts) or a Terminal-Bench v1 task
// (terminal-bench.ts, which stages it in Harbor's layout first). It chooses between the two, so
// neither of them imports the other's chooser.
import { existsSync, statSync } from 'node:fs';
import { stringify } from 'yaml';
import { CliError } from './errors.ts';
import { HEADER, harborDoc } from './harbor.ts';
import { isTerminalBench, terminalBenchCompose } from './terminal-bench.ts';

export interface HarborTask {
  compose: string;
  /** The folder shipped as the context. */
  root: string;
  /** Removes what the conversion staged (a Terminal-Bench task's Harbor-layout copy). */
  done(): void;
}

/**
 * A task folder as a compose file: a Harbor task (task.toml), with or without [[steps]], or a
 * Terminal-Bench v1 task (task.yaml), staged in Harbor's layout first (terminal-bench.ts).
 */
export function harborCompose(dir: string): HarborTask {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new CliError(`${dir} is not a directory`);
  if (isTerminalBench(dir)) return terminalBenchCompose(dir);
  return { compose: HEADER + stringify(harborDoc(dir)), root: dir, done: () => {} };
}
