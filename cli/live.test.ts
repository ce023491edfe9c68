// The attached-process helpers and the live verbs' parsing and tables, in-process: exit codes from
// an end event, input cut to the server's chunk size, gap notes, signal names, `-it`, `ps` and
// `fs ls` tables. The verbs themselves run on real Docker in test/e2e/cli-live.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCommandArgs } from './args.ts';
import { exec } from './commands/files.ts';
import { entryTable } from './commands/fs.ts';
import { kill, processTable, signalName } from './commands/processes.ts';
import { CliError, UsageError } from './errors.ts';
import { chunks, exitCodeOf, gapNote, localSize } from './live.ts';

test('the exit code: the process’s own, 128 + a signal’s number, or an error naming why there is none', () => {
  assert.equal(exitCodeOf('p', { exit_code: 0 }), 0);
  assert.equal(exitCodeOf('p', { exit_code: 3 }), 3);
  assert.equal(exitCodeOf('p', { exit_code: null, signal: 'KILL' }), 137);
  assert.equal(exitCodeOf('p', { exit_code: null, signal: 'TERM' }), 143);
  assert.throws(
    () => exitCodeOf('proc_1', { exit_code: null, reason: 'the host stream dropped' }),
    (err: unknown) =>
      err instanceof CliError &&
      err.message === 'process proc_1 ended without an exit code: the host stream dropped',
  );
});

test('input is cut into chunks the server takes whole, in order', () => {
  const data = Buffer.from('x'.repeat(10).concat('y'.repeat(5)));
  assert.deepEqual(
    chunks(data, 4).map((c) => c.toString()),
    ['xxxx', 'xxxx', 'xxyy', 'yyy'],
  );
  assert.deepEqual(chunks(Buffer.alloc(0)), []);
  const big = Buffer.alloc(64 * 1024 * 2 + 1);
  assert.deepEqual(
    chunks(big).map((c) => c.length),
    [65536, 65536, 1],
  );
});

test('a gap is one line that says how much was lost, with a terminal’s line ends in raw mode', () => {
  assert.equal(
    gapNote(5, 9, false),
    '[svc: 5 output frames lost (seq 5-9): the process wrote faster than it was read]\n',
  );
  assert.match(gapNote(2, 2, true), /^\r\n\[svc: 1 output frame lost \(seq 2-2\)[^\n]*\]\r\n$/);
});

test('the local size: a terminal’s, else 24x80', () => {
  assert.deepEqual(localSize([]), { rows: 24, cols: 80 });
  assert.deepEqual(localSize([{ isTTY: false }, { isTTY: true, getWindowSize: () => [132, 50] }]), {
    rows: 50,
    cols: 132,
  });
});

test('signal names: with or without SIG, any case; others refused as usage', () => {
  assert.equal(signalName('TERM'), 'TERM');
  assert.equal(signalName('sigkill'), 'KILL');
  assert.equal(signalName('Int'), 'INT');
  assert.equal(signalName('9'), null);
  assert.equal(signalName('SIGBOGUS'), null);
  assert.equal(parseCommandArgs(kill, ['env_1', 'proc_1']).flags.signal, 'TERM');
  assert.equal(parseCommandArgs(kill, ['-s', 'KILL', 'env_1', 'proc_1']).flags.signal, 'KILL');
});

test('exec takes -i and -t apart or together, and a short group with a non-boolean is refused', () => {
  const both = parseCommandArgs(exec, ['-it', '--service', 'app', 'env_1', 'sh']);
  assert.equal(both.flags.interactive, true);
  assert.equal(both.flags.tty, true);
  assert.deepEqual(both.args, ['env_1', 'sh']);
  const apart = parseCommandArgs(exec, ['-t', '-i', '--service', 'app', 'env_1', 'sh']);
  assert.equal(apart.flags.interactive && apart.flags.tty, true);
  const plain = parseCommandArgs(exec, ['--service', 'app', 'env_1', 'ls', '-it']);
  assert.equal(plain.flags.interactive, undefined);
  assert.deepEqual(plain.args, ['env_1', 'ls', '-it']);
  assert.throws(
    () => parseCommandArgs(exec, ['-ix', '--service', 'app', 'env_1', 'sh']),
    (err: unknown) => err instanceof UsageError,
  );
});

test('ps: a header and one row per process; the exit column says the code or the signal', () => {
  const out = processTable([
    {
      pid: 'proc_a',
      service: 'app',
      cmd: ['sleep', '1000'],
      status: 'running',
      started_at: '2026-01-02T03:04:05.678Z',
      tty: false,
      stdin: false,
    },
    {
      pid: 'proc_b',
      service: 'web',
      cmd: ['sh', '-c', 'echo a\n echo b'],
      status: 'exited',
      exit_code: null,
      signal: 'KILL',
      started_at: '2026-01-02T03:04:06Z',
      tty: true,
      stdin: true,
    },
    {
      pid: 'proc_c',
      service: 'web',
      cmd: ['true'],
      status: 'exited',
      exit_code: 0,
      started_at: '2026-01-02T03:04:07Z',
      tty: false,
      stdin: false,
    },
  ]);
  assert.equal(
    out,
    'PID     SERVICE  STATUS   EXIT     STARTED               COMMAND\n' +
      'proc_a  app      running           2026-01-02T03:04:05Z  sleep 1000\n' +
      'proc_b  web      exited   SIGKILL  2026-01-02T03:04:06Z  sh -c echo a echo b\n' +
      'proc_c  web      exited   0        2026-01-02T03:04:07Z  true\n',
  );
});

test('fs ls: octal modes, sizes aligned right, directories marked with a slash', () => {
  const out = entryTable([
    { name: 'd', path: '/w/d', type: 'dir', size: 4096, mode: 0o755, mtime: '2026-01-02T03:04:05.1Z' },
    { name: 'f', path: '/w/f', type: 'file', size: 7, mode: 0o4644, mtime: '2026-01-02T03:04:05Z' },
    { name: 'l', path: '/w/l', type: 'symlink', size: 1, mode: 0o777, mtime: '2026-01-02T03:04:05Z' },
  ]);
  assert.equal(
    out,
    'TYPE     MODE  SIZE  MTIME                 PATH\n' +
      'dir      0755  4096  2026-01-02T03:04:05Z  /w/d/\n' +
      'file     4644     7  2026-01-02T03:04:05Z  /w/f\n' +
      'symlink  0777     1  2026-01-02T03:04:05Z  /w/l\n',
  );
});
