import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkResult } from './result-check.ts';

function reason(kind: Parameters<typeof checkResult>[0], result: unknown): string {
  try {
    checkResult(kind, result);
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
}

describe('result receipt check (compiled from protocol/results.ts)', () => {
  it('accepts a result with the fields the orchestrator reads, ignoring the rest', () => {
    assert.equal(reason('env.create', { endpoints: { web: 'http://x' }, started_in: 3 }), 'accepted');
    assert.equal(reason('verify.run', { reward: null, source: 'reward.txt' }), 'accepted');
    assert.equal(reason('host.report', { capabilities: { provider: 'sandbox-a' } }), 'accepted');
    assert.equal(reason('env.put', {}), 'accepted');
  });

  it('names the first bad field in the order the result lists them, with its type', () => {
    assert.equal(reason('env.exec', []), 'malformed env.exec result: not an object');
    assert.equal(
      reason('env.create', { endpoints: [] }),
      'malformed env.create result: endpoints must be object',
    );
    assert.equal(reason('env.get', { tar_b64: 1 }), 'malformed env.get result: tar_b64 must be string');
    assert.equal(
      reason('verify.run', { reward: 'x', source: '' }),
      'malformed verify.run result: reward must be number|null',
    );
    assert.equal(
      reason('env.snapshot', { snapshot: 's', frozen_for: Number.NaN }),
      'malformed env.snapshot result: frozen_for must be number',
    );
    assert.equal(
      reason('verify.collect', { files: 1, bytes: 2, missing: [], refused: {} }),
      'malformed verify.collect result: refused must be array',
    );
    assert.equal(
      reason('env.pause', { services: [1] }),
      'malformed env.pause result: services.0 must be string',
    );
  });
});
