// `bounded(task, input, ms)`: the outcome of a parse run in a worker thread, or a rejection naming
// the bound when it did not finish (the worker is terminated, so the test run goes on).
import { Worker } from 'node:worker_threads';

export interface Outcome {
  ok: boolean;
  message: string;
  name?: string;
}

export function bounded(task: 'compose' | 'old-cpus', input: string, ms: number): Promise<Outcome> {
  const w = new Worker(new URL('./worker.ts', import.meta.url), { workerData: { task, input } });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void w.terminate();
      reject(new Error(`${task}: still running after ${ms} ms (super-linear on this input?)`));
    }, ms);
    w.once('message', (m: Outcome) => {
      clearTimeout(timer);
      void w.terminate();
      resolve(m);
    });
    w.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}
