// The CLI without a server: help, completion, usage errors (exit 2), the not-signed-in message,
// unavailable verbs, an unreachable or invalid server (exit 1, one line).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertExit, assertFails, assertUsage, freePort, removeDir, svc, tempDir } from './harness.ts';

/** Every command of the spec's table, as words. */
export const SPEC_COMMANDS = [
  'login',
  'whoami',
  'templates',
  'init',
  'project create',
  'project list',
  'project envs',
  'cloud connect',
  'cloud list',
  'host list',
  'host join-token',
  'deploy',
  'env get',
  'env versions',
  'env deployments',
  'env destroy',
  'fork',
  'snapshot',
  'rollback',
  'verify',
  'files put',
  'files get',
  'exec',
  'deployment get',
  'deployment watch',
  'events',
];
const UNAVAILABLE = ['promote', 'prove', 'sheet', 'export', 'import'];
const NOT_SIGNED_IN = 'svc: not signed in: run svc login or set SVC_API_KEY\n';

let home: string;
const run = (args: string[], env: Record<string, string> = {}) => svc(args, { home, env });

before(() => {
  home = tempDir();
});
after(() => removeDir(home));

describe('help', () => {
  test('svc --help (exit 0) names every command of the spec and the unavailable verbs', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = await run(args);
      assertExit(r, 0);
      for (const c of SPEC_COMMANDS) assert.ok(r.stdout.includes(`svc ${c}`), `${c} missing from help`);
      for (const v of UNAVAILABLE) assert.ok(r.stdout.includes(v), `${v} missing from help`);
      assert.match(r.stdout, /SVC_API_KEY/);
      assert.equal(r.stderr, '');
    }
  });

  test('svc <verb> --help (exit 0) describes the command and every flag', async () => {
    const r = await run(['deploy', '--help']);
    assertExit(r, 0);
    assert.match(
      r.stdout,
      /^Usage: svc deploy --project P \[--env alpha\] \[-f compose\.yaml\] \[--warm 'cmd args'\] \[--harbor DIR\] \[--context DIR\] \[--wait\]$/m,
    );
    for (const flag of ['--project', '--env', '-f, --file', '--warm', '--wait', '--help'])
      assert.ok(r.stdout.includes(flag), flag);
    const sub = await run(['files', 'get', '-h']);
    assertExit(sub, 0);
    assert.match(sub.stdout, /Usage: svc files get --service S <env> <container path> <local dir>/);
    const viaHelp = await run(['help', 'cloud', 'connect']);
    assertExit(viaHelp, 0);
    for (const flag of ['--name', '--token', '--server-type', '--location'])
      assert.ok(viaHelp.stdout.includes(flag));
    const group = await run(['env', '--help']);
    assertExit(group, 0);
    for (const s of ['get', 'versions', 'deployments', 'destroy'])
      assert.ok(group.stdout.includes(`svc env ${s} <env>`));
    const login = await run(['login', '--help']);
    assertExit(login, 0);
    assert.match(login.stdout, /--no-browser/);
  });

  test('every command has its own help', async () => {
    for (const c of SPEC_COMMANDS) {
      const r = await run([...c.split(' '), '--help']);
      assertExit(r, 0);
      assert.ok(r.stdout.startsWith(`Usage: svc ${c}`), r.stdout);
    }
  });
});

describe('completion', () => {
  test('bash and zsh scripts name every verb, subverb and flag, and parse', async () => {
    for (const shell of ['bash', 'zsh']) {
      const r = await run(['completion', shell]);
      assertExit(r, 0);
      for (const c of SPEC_COMMANDS)
        for (const w of c.split(' ')) assert.ok(r.stdout.includes(w), `${shell}: ${w}`);
      for (const flag of [
        '--project',
        '--env',
        '--warm',
        '--wait',
        '--service',
        '--no-browser',
        '--server-type',
        '--resume',
        '--out',
        '--kind',
        '--source',
        '--version',
        '--name',
        '--location',
        '--token',
        '-f',
      ]) {
        assert.ok(r.stdout.includes(flag), `${shell}: ${flag}`);
      }
      const file = join(home, `completion.${shell}`);
      writeFileSync(file, r.stdout);
      const check = spawnSync(shell, ['-n', file], { encoding: 'utf8' });
      if (check.error) continue; // zsh may be absent; bash never is
      assert.equal(check.status, 0, `${shell} -n: ${check.stderr}`);
    }
  });

  test('bash completion completes verbs, subverbs, flags and fixed values', () => {
    const script = spawnSync(
      process.execPath,
      [join(import.meta.dirname, '../../programs/svc.ts'), 'completion', 'bash'],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH, HOME: home },
      },
    ).stdout;
    const complete = (...words: string[]) => {
      const probe = `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _svc; echo "\${COMPREPLY[*]}"`;
      return spawnSync('bash', ['-c', probe], { encoding: 'utf8' }).stdout.trim().split(' ');
    };
    assert.deepEqual(complete('svc', 'en'), ['env']);
    assert.deepEqual(complete('svc', 'env', ''), ['get', 'versions', 'deployments', 'destroy']);
    assert.ok(complete('svc', 'deploy', '--w').includes('--wait=false'));
    assert.deepEqual(complete('svc', 'cloud', 'connect', ''), [
      'manual',
      'cloudvm',
      'sandbox-a',
      'sandbox-b',
    ]);
    assert.deepEqual(complete('svc', 'completion', ''), ['bash', 'zsh']);
  });

  test('an unknown shell is a usage error', async () => {
    assertUsage(await run(['completion', 'fish']), "unknown shell 'fish'");
  });
});

describe('usage errors exit 2', () => {
  test('no arguments, unknown verb, unknown or missing subverb', async () => {
    const none = await run([]);
    assertExit(none, 2);
    assert.match(none.stderr, /Usage: svc <command>/);
    assertUsage(await run(['frobnicate']), "unknown command 'frobnicate'");
    assertUsage(await run(['env', 'frob', 'env_1']), "unknown command 'env frob'");
    const bare = await run(['project']);
    assertExit(bare, 2);
    assert.match(bare.stderr, /^svc: project needs a command/);
  });

  test('missing positional, too many, unknown flag, flag after a positional', async () => {
    assertUsage(await run(['env', 'get']), 'missing <env>');
    assertUsage(await run(['rollback', 'env_1']), 'missing <version>');
    assertUsage(await run(['files', 'put', '--service', 'app', 'env_1', 'local']), 'missing <container dir>');
    assertUsage(await run(['env', 'get', 'env_1', 'env_2']), "unexpected argument 'env_2'");
    assertUsage(await run(['whoami', '--bogus']), 'unknown flag --bogus');
    assertUsage(await run(['deploy', '-x']), 'unknown flag -x');
    const late = await run(['fork', 'env_1', '--name', 'x']);
    assertUsage(late, 'flag --name after a positional argument');
    assert.match(
      late.stderr,
      /^usage: svc fork \[--name N\] \[--version V\] \[--count N\] \[--wait\] <env>$/m,
    );
    // Even when the count of positionals would fit, a late flag is refused.
    assertUsage(await run(['rollback', 'env_1', '--wait=false']), 'flag --wait=false after a positional');
    assertUsage(await run(['project', 'create', 'p', '--kind', 'agent']), 'flag --kind after a positional');
  });

  test('flag values: required flags, missing values, booleans take only true or false', async () => {
    assertUsage(await run(['deploy']), '--project is required');
    assertUsage(await run(['deploy', '--env', 'x']), '--project is required');
    assertUsage(await run(['deploy', '--project']), '--project needs a value');
    assertUsage(await run(['deploy', '--project', '--wait']), '--project needs a value');
    assertUsage(
      await run(['deploy', '--project', 'p', '--wait=maybe']),
      "--wait takes true or false, not 'maybe'",
    );
    assertUsage(await run(['files', 'get', 'env_1', '/a', 'b']), '--service is required');
    assertUsage(await run(['exec', '--service', 's', 'env_1']), 'missing <cmd>');
    assertUsage(
      await run(['deploy', '--project', 'p', '--warm', ' '], { SVC_API_KEY: 'k' }),
      '--warm needs a command',
    );
  });

  test('a usage error wins over a missing credential', async () => {
    assertUsage(await run(['snapshot']), 'missing <env>');
  });
});

describe('errors exit 1 with one line', () => {
  test('with no credential, any command says not signed in', async () => {
    for (const args of [
      ['whoami'],
      ['project', 'list'],
      ['deploy', '--project', 'p', '-f', 'nowhere.yaml'],
      ['files', 'put', '--service', 's', 'env_1', '/nowhere', '/tmp'],
      ['init', 'agent'],
      ['env', 'get', 'env_1'],
      ['exec', '--service', 's', 'env_1', 'true'],
    ]) {
      const r = await run(args);
      assertExit(r, 1);
      assert.equal(r.stderr, NOT_SIGNED_IN, args.join(' '));
      assert.equal(r.stdout, '');
    }
  });

  test('an empty SVC_API_KEY is no credential', async () => {
    const r = await run(['whoami'], { SVC_API_KEY: '' });
    assert.equal(r.stderr, NOT_SIGNED_IN);
  });

  test('the unavailable verbs say so, whatever follows them', async () => {
    for (const verb of UNAVAILABLE) {
      const r = await run([verb, 'env_1', '--x']);
      assertFails(r, `svc: ${verb} is not available`);
    }
  });

  test('an unreachable server is one line, never a stack trace', async () => {
    const port = await freePort();
    const server = `http://127.0.0.1:${port}`;
    const r = await run(['whoami'], { SVC_API_KEY: 'dak_x', SVC_SERVER: server });
    assertFails(r, `svc: cannot reach ${server}: `);
    assert.match(r.stderr, /ECONNREFUSED/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
    const dns = await run(['project', 'list'], {
      SVC_API_KEY: 'dak_x',
      SVC_SERVER: 'http://no-such-host.invalid',
    });
    assertFails(dns, 'svc: cannot reach http://no-such-host.invalid: ');
  });

  test('an invalid server URL is refused', async () => {
    assertFails(
      await run(['whoami'], { SVC_API_KEY: 'k', SVC_SERVER: 'localhost:8080' }),
      'invalid server URL',
    );
    assertFails(await run(['whoami'], { SVC_API_KEY: 'k', SVC_SERVER: 'ftp://x' }), 'invalid server URL');
  });
});
