import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allowed, findSql } from './sql-rule.ts';

test('stores, server/db/ and tests may hold SQL; other modules may not', () => {
  for (const p of [
    'server/envs/store.ts',
    'server/hosts/command-store.ts',
    'server/billing/store/usage.ts',
    'server/db/schema.ts',
    'server/envs/envs.test.ts',
    'test/api/x.test.ts',
  ]) {
    assert.equal(allowed(p), true, p);
  }
  for (const p of ['server/deployments/engine.ts', 'server/dev.ts', 'server/storefront.ts', 'cli/main.ts']) {
    assert.equal(allowed(p), false, p);
  }
});

test('SQL statements are found with their line; prose is not', () => {
  const text = [
    "const a = 'SELECT id FROM hosts WHERE id = ?';",
    '// select the host from the list, then update it',
    'await q.run(`INSERT INTO t (a) VALUES (?)`);',
    "q.run('UPDATE deployments SET params = ? WHERE id = ?');",
    "q.run('DELETE FROM device_codes');",
  ].join('\n');
  assert.deepEqual(findSql(text), [1, 3, 4, 5]);
});
