// Runs one parse off the main thread so a hostile input that would freeze the process shows up as
// a test failure (the worker is terminated at the bound) instead of a hung test run.
import { parentPort, workerData } from 'node:worker_threads';
import { parseCompose } from '../../../server/compose/index.ts';

const { task, input } = workerData as { task: string; input: string };
try {
  if (task === 'compose') parseCompose(input);
  else if (task === 'old-cpus') /^\s*\d*\.?\d+\s*$/.test(input);
  parentPort?.postMessage({ ok: true, message: '' });
} catch (err) {
  parentPort?.postMessage({ ok: false, message: (err as Error).message, name: (err as Error).name });
}
