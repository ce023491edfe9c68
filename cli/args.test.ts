// Flag parsing rules in-process: flags before positionals, --flag=value, boolean =true/=false,
// short flags with attached values, `--` ends the flags, a variadic tail keeps its dashes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCommandArgs } from './args.ts';
import type { Command } from './command.ts';
import { login } from './commands/account.ts';
import { exec } from './commands/files.ts';
import { deploy } from './commands/lifecycle.ts';
import { UsageError } from './errors.ts';

const parse = (cmd: Command, argv: string[]) => parseCommandArgs(cmd, argv);
const refused = (cmd: Command, argv: string[], message: RegExp) =>
  assert.throws(
    () => parse(cmd, argv),
    (err: unknown) => err instanceof UsageError && message.test(err.message),
  );

test('defaults, --flag=value, short flags with separate or attached values', () => {
  assert.deepEqual(parse(deploy, ['--project', 'p']).flags, {
    project: 'p',
    env: 'alpha',
    file: 'compose.yaml',
    wait: true,
  });
  assert.deepEqual(parse(deploy, ['--project=p', '-fx.yaml', '--env=beta']).flags, {
    project: 'p',
    env: 'beta',
    file: 'x.yaml',
    wait: true,
  });
  assert.equal(parse(deploy, ['--project', 'p', '-f', 'y.yaml']).flags.file, 'y.yaml');
  assert.equal(parse(deploy, ['--project', 'p', '--warm=a b=c']).flags.warm, 'a b=c');
});

test('boolean flags: bare, =true, =false; anything else is refused', () => {
  assert.equal(parse(deploy, ['--project', 'p', '--wait']).flags.wait, true);
  assert.equal(parse(deploy, ['--project', 'p', '--wait=false']).flags.wait, false);
  assert.equal(parse(deploy, ['--wait=false', '--project', 'p', '--wait=true']).flags.wait, true);
  refused(deploy, ['--project', 'p', '--wait=no'], /takes true or false/);
});

test('unknown flags, missing values and required flags are usage errors', () => {
  refused(deploy, ['--project', 'p', '--nope'], /unknown flag --nope/);
  refused(deploy, ['--project'], /--project needs a value/);
  refused(deploy, [], /--project is required/);
  refused(deploy, ['--project', 'p', 'extra'], /unexpected argument 'extra'/);
});

test('--help is seen before required flags are checked', () => {
  assert.equal(parse(deploy, ['--help']).help, true);
  assert.equal(parse(deploy, ['-h']).help, true);
});

test('exec: the command keeps its dashes, -- is passed on for the command to drop', () => {
  assert.deepEqual(parse(exec, ['--service', 's', 'env_1', 'ls', '-la']).args, ['env_1', 'ls', '-la']);
  assert.deepEqual(parse(exec, ['--service', 's', 'env_1', '--', 'ls']).args, ['env_1', '--', 'ls']);
  assert.deepEqual(parse(exec, ['--service', 's', '--', 'env_1', 'ls']).args, ['env_1', 'ls']);
  refused(exec, ['--service', 's'], /missing <env>/);
});

test('login ignores what it does not know, wherever it is', () => {
  const p = parse(login, ['--x', 'stray', '--server', 'http://h', '--y=1', '--no-browser']);
  assert.deepEqual(p.flags, { server: 'http://h', 'no-browser': true });
});
