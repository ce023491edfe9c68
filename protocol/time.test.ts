import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoNow } from './time.ts';

test('isoNow is the current time as toISOString writes it, never behind the clock', () => {
  for (let i = 0; i < 1000; i++) {
    const before = Date.now();
    const t = isoNow();
    const after = Date.now();
    assert.match(t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(new Date(t).toISOString(), t);
    assert.ok(Date.parse(t) >= before && Date.parse(t) <= after, `${t} outside ${before}..${after}`);
  }
});
