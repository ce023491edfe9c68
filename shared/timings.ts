// Where a command's time went, step by step, for the evidence of the deployment phase that sent it
// (a cold start is judged by its profile, not by one total). Steps may overlap: each records its
// own wall time, and a step run twice adds up.

export class Timings {
  readonly ms: Record<string, number> = {};

  add(step: string, ms: number): void {
    this.ms[step] = Math.round((this.ms[step] ?? 0) + ms);
  }

  /** Runs `fn` and records its wall time under `step`, whether it resolves or throws. */
  async step<T>(step: string, fn: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      this.add(step, performance.now() - t0);
    }
  }
}
