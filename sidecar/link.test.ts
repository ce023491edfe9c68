import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoff } from './link.ts';

test('reconnect backoff doubles from 1 s and never leaves the spec window of 1 s to 30 s, jitter included', () => {
  for (let attempt = 0; attempt < 12; attempt++) {
    for (let i = 0; i < 200; i++) {
      const ms = backoff(attempt);
      assert.ok(ms >= 1000 && ms <= 30_000, `attempt ${attempt}: ${ms} ms`);
      const base = Math.min(30_000, 1000 * 2 ** attempt);
      assert.ok(ms >= base || base >= 30_000, `attempt ${attempt}: ${ms} ms below ${base}`);
    }
  }
  assert.ok(backoff(0) < 1300 && backoff(10) >= 30_000 * 0.999);
});
