// Every regex applied to user input runs in linear time or behind a length bound.
// Each case puts a ~900 kB adversarial value (just under the 1 MiB compose limit) where a
// backtracking pattern would go quadratic: the `cpus: "<digits>x"` deploy froze the event loop
// 87 s at 250 kB. A linear check answers these in milliseconds; the quadratic one cannot finish
// inside the bound. The parse runs in a worker thread that is terminated at the bound, so a
// regression fails this file instead of hanging the run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bounded } from './support/bounded.ts';

/** Far above a linear parse of 1 MiB (~0.1 s), far below the quadratic one (minutes). */
const BOUND_MS = 20_000;

const N = 900_000;
const digits = '1'.repeat(N);

/** A one-service compose file with `value` (YAML-quoted) at `key` of the service. */
function withService(lines: string): string {
  return `services:\n  app:\n    image: redis:7\n${lines}`;
}

async function refused(text: string): Promise<string> {
  const r = await bounded('compose', text, BOUND_MS);
  assert.equal(r.ok, false, 'the adversarial value was accepted');
  assert.equal(r.name, 'ComposeError', r.message);
  return r.message;
}

const CASES: Array<[string, string]> = [
  ['cpus: digits then a letter', `    cpus: "${digits}x"\n`],
  ['cpus: dot-digits then a letter', `    cpus: ".${digits}x"\n`],
  ['cpus: spaces', `    cpus: "1${' '.repeat(N)}x"\n`],
  [
    'deploy.resources.limits.cpus',
    `    deploy:\n      resources:\n        limits:\n          cpus: "${digits}x"\n`,
  ],
  ['mem_limit: digits then a letter', `    mem_limit: "${digits}x"\n`],
  ['mem_limit: decimal digits', `    mem_limit: "1.${digits}x"\n`],
  ['pids_limit', `    pids_limit: "${digits}x"\n`],
  ['healthcheck interval', `    healthcheck:\n      test: ["CMD", "true"]\n      interval: "${digits}"\n`],
  [
    'healthcheck interval units',
    `    healthcheck:\n      test: ["CMD", "true"]\n      interval: "${'1s'.repeat(N / 2)}x"\n`,
  ],
  ['user', `    user: "${'a'.repeat(N)}:"\n`],
  ['ports', `    ports: ["${digits}-x"]\n`],
  ['ports long range', `    ports: ["1:${'1'.repeat(N)}/"]\n`],
  ['environment key', `    environment:\n      "${'a'.repeat(N)} ": x\n`],
];

describe('regexes on compose input are linear or bounded', () => {
  for (const [name, lines] of CASES) {
    it(`${name}: refused with a reason`, async () => {
      const msg = await refused(withService(lines));
      assert.match(msg, /^compose: /);
      assert.ok(msg.length < 2_000, `the refusal echoes the whole value (${msg.length} chars)`);
    });
  }

  it('image reference', async () => {
    const msg = await refused(`services:\n  app:\n    image: "${'a-'.repeat(N / 2)}!"\n`);
    assert.match(msg, /not an image reference/);
  });

  it('the bound catches a quadratic pattern (the old cpus check)', async () => {
    await assert.rejects(bounded('old-cpus', `${digits}x`, 3_000), /still running after/);
  });
});
