// svcd's --server takes one control-plane URL or several (replicas reached without a load
// balancer); every one is checked, and the list is bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SERVERS, OptionsError, parseOptions } from './options.ts';

test('--server takes several URLs separated by commas, each checked', () => {
  const o = parseOptions(['run', '--server', 'http://a:8080/, https://b:8443'], {});
  assert.equal(o.server, 'http://a:8080,https://b:8443');
  assert.throws(
    () => parseOptions(['run', '--server', 'http://a:8080,ftp://b'], {}),
    (e: Error) => e instanceof OptionsError && /http:\/\/ or https:\/\//.test(e.message),
  );
  assert.throws(() => parseOptions(['run', '--server', 'http://a,'], {}), /is not a URL/);
  const many = Array.from({ length: MAX_SERVERS + 1 }, (_, i) => `http://r${i}:8080`).join(',');
  assert.throws(() => parseOptions(['run', '--server', many], {}), /at most 16 URLs/);
});
