// fast-check settings shared by the fuzz suites: a fixed seed (a failure reproduces), and a short
// report (a counterexample may be a megabyte of YAML or a 16 MiB frame).
import fc, { type Arbitrary, type Parameters as FcParameters, type RunDetails } from 'fast-check';

export const SEED = 9;

function report<T>(out: RunDetails<T>): void {
  if (!out.failed) return;
  const example = JSON.stringify(out.counterexample ?? null) ?? '';
  const shown =
    example.length > 400
      ? `${example.slice(0, 200)} ... ${example.slice(-150)} (${example.length} chars)`
      : example;
  throw new Error(
    `property failed (seed ${out.seed}, path ${out.counterexamplePath}) on ${shown}: ` +
      `${String(out.errorInstance instanceof Error ? out.errorInstance.message : out.errorInstance).slice(0, 600)}`,
  );
}

export function runs<T>(numRuns: number): FcParameters<T> {
  return { numRuns, seed: SEED, reporter: report<T>, endOnFailure: true };
}

/** `n` values of `arb` from a fresh seed (the soak benchmark draws bursts from the suites' generators). */
export function draw<T>(arb: Arbitrary<T>, n: number): T[] {
  return fc.sample(arb, { numRuns: n, seed: Date.now() | 0 });
}
