// The checkout's bins from any folder: package.json points them at launchers that the machine's own
// Node (20 here, which cannot run .ts sources) starts, and that run the program on the pinned Node
// with the same arguments, stdio, exit code and signal; `npx --prefix <checkout> svc` as a newcomer
// types it, from a folder outside the checkout.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { removeDir, tempDir } from '../cli/harness.ts';
import { systemNode } from './release-support.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const node20 = systemNode();
const pinned = realpathSync(join(ROOT, 'node_modules/node/bin/node'));

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  pid: number;
}

/** Runs argv[0] with the rest, from `cwd`, with no SVC_* variable and only the system's PATH. */
function run(
  argv: string[],
  opts: {
    cwd: string;
    input?: string;
    env?: Record<string, string>;
    onOut?: (out: string, pid: number) => void;
  },
): Promise<Ran> {
  const env: Record<string, string> = { HOME: opts.cwd, PATH: `${dirname(node20.path)}:/usr/bin:/bin` };
  Object.assign(env, opts.env);
  const child = spawn(argv[0], argv.slice(1), { cwd: opts.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end(opts.input ?? '');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
    opts.onOut?.(stdout, child.pid as number);
  });
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((res, rej) => {
    child.on('error', rej);
    child.on('close', (code, signal) => res({ code, signal, stdout, stderr, pid: child.pid as number }));
  });
}

const show = (r: Ran) =>
  `exit ${r.code} signal ${r.signal}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

describe('the checkout bins, started by any node from any folder', () => {
  const dir = tempDir('svc-launcher-');
  after(() => removeDir(dir));
  const bins = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).bin as Record<string, string>;

  // What the launcher runs: reports its Node and pid, echoes arguments and stdin, exits or dies as told.
  const program = join(dir, 'probe.ts');
  writeFileSync(
    program,
    `const [how, arg] = process.argv.slice(2);
const note: string = process.versions.node + ' ' + process.pid;
if (how === 'report') console.log(note);
if (how === 'args') console.log(JSON.stringify(process.argv.slice(3)));
if (how === 'stdin') process.stdin.pipe(process.stdout);
if (how === 'exit') process.exitCode = Number(arg);
if (how === 'die') process.kill(process.pid, arg);
if (how === 'wait') {
  process.on(arg, () => { console.log('got ' + arg); process.exit(3); });
  setInterval(() => {}, 1000);
  console.log('ready');
}
`,
  );
  const launcher = join(dir, 'probe.cjs');
  writeFileSync(
    launcher,
    `require(${JSON.stringify(join(ROOT, 'programs/launch.cjs'))})(${JSON.stringify(program)});\n`,
  );
  const probe = (args: string[], opts: Partial<Parameters<typeof run>[1]> = {}) =>
    run([node20.path, launcher, ...args], { cwd: dir, ...opts });

  test(`package.json's bins run on ${node20.version} from outside the checkout`, async () => {
    assert.notEqual(node20.path, pinned, 'the machine has a node of its own');
    assert.deepEqual(Object.keys(bins).sort(), ['svc', 'svc-server', 'svcd']);
    const bin = (name: string) => join(ROOT, bins[name]);
    const version = await run([node20.path, bin('svc'), 'version'], { cwd: dir });
    assert.equal(version.code, 0, show(version));
    assert.match(version.stdout, /^svc \S+\n$/);
    const help = await run([node20.path, bin('svc'), '--help'], { cwd: dir });
    assert.equal(help.code, 0, show(help));
    assert.match(help.stdout, /svc deploy/);
    // The program's own exit codes come through: a usage error is 2, a failure 1.
    const usage = await run([node20.path, bin('svc'), 'no-such-verb'], { cwd: dir });
    assert.equal(usage.code, 2, show(usage));
    assert.match(usage.stderr, /^svc: unknown command 'no-such-verb'/);
    const down = await run([node20.path, bin('svc'), 'whoami'], {
      cwd: dir,
      env: { SVC_SERVER: 'http://127.0.0.1:1', SVC_API_KEY: 'dak_launcher_test_key_0000' },
    });
    assert.equal(down.code, 1, show(down));
    for (const [name, args, want] of [
      ['svc-server', ['-h'], /^svc-server: usage: svc-server /],
      ['svcd', ['help'], /^svcd: usage:/],
    ] as const) {
      const r = await run([node20.path, bin(name), ...args], { cwd: dir });
      assert.equal(r.code, 2, show(r));
      assert.match(r.stderr, want);
    }
  });

  test('npx --prefix <checkout> svc from another folder, and npx svc in the checkout', async () => {
    // A fresh npm cache, offline: npx links the checkout itself, nothing is downloaded.
    const env = {
      npm_config_cache: join(dir, 'npm-cache'),
      npm_config_offline: 'true',
      npm_config_update_notifier: 'false',
    };
    for (const [cwd, argv] of [
      [dir, ['npx', '--yes', '--prefix', ROOT, 'svc', 'version']],
      [ROOT, ['npx', 'svc', 'version']],
    ] as const) {
      const r = await run([...argv], { cwd, env });
      assert.equal(r.code, 0, `${argv.join(' ')} in ${cwd}\n${show(r)}`);
      assert.match(r.stdout, /^svc \S+\n$/);
    }
  });

  test('the program runs on the pinned Node in a child; on the pinned Node already, in the same process', async () => {
    const pinnedMajor = process.versions.node.split('.')[0];
    const viaOld = await probe(['report']);
    assert.equal(viaOld.code, 0, show(viaOld));
    const [version, pid] = viaOld.stdout.trim().split(' ');
    assert.equal(version.split('.')[0], pinnedMajor);
    assert.notEqual(Number(pid), viaOld.pid);
    const viaPinned = await run([pinned, launcher, 'report'], { cwd: dir });
    assert.equal(viaPinned.code, 0, show(viaPinned));
    assert.equal(viaPinned.stdout, `${process.versions.node} ${viaPinned.pid}\n`);
  });

  test('arguments, stdin and stdout pass through unchanged', async () => {
    const args = ['a b', '', '--flag=x y', "it's", '$HOME', '*'];
    const r = await probe(['args', ...args]);
    assert.deepEqual(JSON.parse(r.stdout), args);
    const input = 'line one\nline two\u00e9\n';
    assert.equal((await probe(['stdin'], { input })).stdout, input);
  });

  test('exit codes and deaths by signal are the launcher’s own', async () => {
    for (const code of [0, 1, 7, 130]) assert.equal((await probe(['exit', String(code)])).code, code);
    for (const signal of ['SIGTERM', 'SIGKILL', 'SIGINT'] as const) {
      const r = await probe(['die', signal]);
      assert.deepEqual([r.code, r.signal], [null, signal], show(r));
    }
  });

  test('a signal sent to the launcher reaches the program', async () => {
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      let sent = false;
      const r = await probe(['wait', signal], {
        onOut: (out, pid) => {
          if (sent || !out.includes('ready')) return;
          sent = true;
          process.kill(pid, signal);
        },
      });
      assert.deepEqual([r.code, r.stdout], [3, `ready\ngot ${signal}\n`], show(r));
    }
  });
});
