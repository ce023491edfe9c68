// The spare's shell text without Docker: quoting, the environment it restores, the
// switch. Real shells run it in spare.test.ts (ash, dash).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { sparesEnabledFromEnv } from './spare-execs.ts';
import { liveSetup, restoreFor, SPARE_SCRIPT, shellQuote, spareLine } from './spare-line.ts';

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

test("a live process's directory and variables: set before the lookup, or no line when it cannot say them", () => {
  assert.equal(liveSetup('tmp', {}), null, 'a relative directory: Docker refuses it itself');
  assert.equal(liveSetup('/a\0b', {}), null);
  assert.equal(liveSetup('', { 'A.B': '1' }), null);
  assert.equal(liveSetup('', { A: 'x\0' }), null);
  assert.equal(liveSetup('', { svc_n: 'x' }), null, 'the line spells newlines with it');
  assert.equal(liveSetup('', {}), '');
  const restore = restoreFor(['SHLVL=5', 'SHLVL=7']) ?? '';
  assert.match(restore, /export SHLVL='7'/, "the later entry, the process's own, wins");
  // A directory the shell cannot enter: the no-go byte, and nothing of the command runs.
  const setup = liveSetup('/nonexistent-svc-dir', { X: "it's" }) ?? '';
  const line = spareLine(['echo', 'ran'], restoreFor([]) ?? '', setup);
  const out = execFileSync('/bin/sh', ['-c', SPARE_SCRIPT], { input: line, env: { PATH: process.env.PATH } });
  assert.equal(out.toString('utf8'), '\x06\x15');
  const ok = spareLine(
    ['sh', '-c', 'printf "%s|%s" "$X" "$(pwd)"'],
    restoreFor([]) ?? '',
    liveSetup('/', { X: "it's" }) ?? '',
  );
  const out2 = execFileSync('/bin/sh', ['-c', SPARE_SCRIPT], { input: ok, env: { PATH: process.env.PATH } });
  assert.equal(out2.toString('utf8'), "\x06\x07it's|/");
});

test('SVC_EXEC_SPARES turns spares on or off; anything else is refused', () => {
  assert.equal(sparesEnabledFromEnv({}), true);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'on' }), true);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: '0' }), false);
  assert.equal(sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'off' }), false);
  assert.throws(() => sparesEnabledFromEnv({ SVC_EXEC_SPARES: 'maybe' }), /SVC_EXEC_SPARES/);
});
