// The spare's shell text without Docker: quoting, the environment it restores, the
// switch. Real shells run it in spare.test.ts (ash, dash).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { sparesEnabledFromEnv } from './spare.ts';
import { restoreFor, SPARE_SCRIPT, shellQuote, spareLine } from './spare-line.ts';

test('a quoted argument is one line and reads back byte for byte in the local sh', () => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text that must stay unexpanded
  const args = ["it's", 'a\nb\n\n', '$(id) `id` ${X}', 'back\\', '', 'ü😀'];
  const line = spareLine(['printf', '%s|', ...args], restoreFor([]) ?? '');
  assert.equal(line.indexOf('\n'), line.length - 1);
  assert.ok(!shellQuote('a\nb').includes('\n'));
  const out = execFileSync('/bin/sh', ['-c', SPARE_SCRIPT], { input: line, env: { PATH: process.env.PATH } });
  assert.equal(out.toString('utf8'), `\x06\x07${args.join('|')}|`);
});

test('the environment: shell-added names unset or set back; names a shell drops mean no spare', () => {
  assert.equal(restoreFor(['A.B=1']), null);
  assert.equal(restoreFor(['1X=2']), null);
  const r = restoreFor(['SHLVL=5', "PWD=/it's"]) ?? '';
  assert.match(r, /export SHLVL='5'/);
  assert.match(r, /export PWD='\/it'\\''s'/);
  assert.match(r, /unset OLDPWD/);
  assert.match(r, /unset svc_l/);
});

test('SVC_EXEC_SPARES turns spares on or off; anything else is refused', () => {
  assert.equal(sparesEnabledFromEnv({}), true);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'on' }), true);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: '0' }), false);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'off' }), false);
  assert.throws(() => sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'maybe' }), /SVC_EXEC_SPARES/);
});
