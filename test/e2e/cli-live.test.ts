// The CLI's live verbs on real Docker through a real control plane and svcd: `svc shell` and
// `svc exec -it` driven through a real pseudo-terminal (python's pty: typed keys, a resize seen by
// `stty size`, the remote exit code passed through, the terminal restored after an exit and after
// signals), `svc exec -i` with piped stdin, `svc ps`/`svc kill` on a background process, the
// `svc fs` verbs round-tripping bytes, and clear errors for unknown environments and pids.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { assertExit, assertFails, SVC, svc, tempDir } from '../cli/harness.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { start } from './processes-support.ts';
import { finished, IDLE_COMMAND, type Real, startReal } from './real.ts';
import { systemNode } from './release-support.ts';

/** A test that waits for output that never comes fails on its own, showing what the terminal printed. */
const STEP = { timeout: 240_000 };
const DRIVER = resolve(import.meta.dirname, 'fixtures/pty_driver.py');
const LAUNCHER = resolve(import.meta.dirname, '../../programs/svc.cjs');
const STACK = `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
`;

/**
 * Waits until the terminal has its size: an engine older than API 1.42 ignores an exec's initial
 * size, and the sidecar's resize right after the start can reach the terminal after a command
 * that runs at once has looked.
 */
const WHEN_SIZED =
  'until [ "$(stty size 2>/dev/null)" != "" ] && [ "$(stty size)" != "0 0" ]; do sleep 0.1; done; ';

/** Terminals whose program has not ended: a test that fails waiting shows what they printed. */
const running = new Set<Pty>();

/** A program in a pseudo-terminal (fixtures/pty_driver.py): what it printed, keys typed, resizes, signals. */
class Pty {
  out = '';
  readonly exited: Promise<{ code: number; restored: boolean; stderr: string }>;
  readonly #child: ChildProcess;
  #waiters: (() => void)[] = [];

  constructor(argv: string[], env: Record<string, string>, rows: number, cols: number) {
    running.add(this);
    this.#child = spawn('python3', [DRIVER, String(rows), String(cols), ...argv], { env });
    let stderr = '';
    this.#child.stdout?.on('data', (d: Buffer) => {
      this.out += d.toString('utf8');
      for (const w of [...this.#waiters]) w();
    });
    this.#child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    this.exited = new Promise((res) =>
      this.#child.on('close', (code) => {
        const m = /DRIVER-EXIT (\d+) (\w+)/.exec(stderr);
        running.delete(this);
        res({ code: m ? Number(m[1]) : (code ?? -1), restored: m?.[2] === 'restored', stderr });
        for (const w of [...this.#waiters]) w();
      }),
    );
  }

  #command(c: object): void {
    this.#child.stdin?.write(`${JSON.stringify(c)}\n`);
  }
  type(text: string): void {
    this.#command({ write: text });
  }
  resize(rows: number, cols: number): void {
    this.#command({ resize: [rows, cols] });
  }
  signal(name: string): void {
    this.#command({ signal: name });
  }
  kill(): void {
    running.delete(this);
    this.#child.kill('SIGKILL');
  }

  /** Resolves with the first match in the output after `from`; rejects when the program ends first. */
  until(re: RegExp, from = 0): Promise<RegExpExecArray> {
    return new Promise((res, rej) => {
      const check = () => {
        const m = re.exec(this.out.slice(from));
        if (m) {
          this.#waiters = this.#waiters.filter((w) => w !== check);
          res(m);
        } else if (this.#child.exitCode !== null) {
          rej(new Error(`the program ended before ${re}; it printed:\n${this.out}`));
        }
      };
      this.#waiters.push(check);
      check();
    });
  }
}

/** `svc <args>` with bytes in and out (a file's exact bytes, stdin piped). */
function svcBytes(
  args: string[],
  env: Record<string, string>,
  input?: Buffer,
): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [SVC, ...args], { env });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.on('data', (d: Buffer) => {
      stderr += d;
    });
    child.on('error', rej);
    child.on('close', (code) => res({ code: code ?? -1, stdout: Buffer.concat(out), stderr }));
    // A command that does not read its input ends before taking all of it.
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? Buffer.alloc(0));
  });
}

describe('svc shell, exec -i/-t, ps, kill and fs on real Docker', {
  skip: tier('docker'),
  timeout: 1_500_000,
}, () => {
  let r: Real;
  let env: string;
  let cliEnv: Record<string, string>;
  let home: string;
  const run = (args: string[]) => svc(args, { home, env: cliEnv });

  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_DEV_LOGIN: '1' } });
    const p = await r.t.req('POST', '/v1/projects', { body: { name: 'clilive' } });
    env = p.body.environments[0].ID;
    const d = await r.t.req('POST', '/v1/projects/clilive/deploy', { body: { compose: STACK } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const { deployment } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
    home = tempDir();
    cliEnv = { SVC_SERVER: r.t.url, SVC_API_KEY: r.t.key };
  });
  afterEach(() => {
    for (const p of running) {
      process.stderr.write(
        `--- a terminal still running after the test printed:\n${JSON.stringify(p.out)}\n`,
      );
      p.kill();
    }
  });
  after(async () => r?.close());

  const ptyEnv = () => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TERM: 'xterm', ...cliEnv });

  test(
    "svc shell on Node 20's launcher: typed keys, a resize seen by stty size, exit 3 passed through",
    STEP,
    async () => {
      // The only service is the default; the machine's own Node starts the launcher, as users do.
      const sh = new Pty([systemNode().path, LAUNCHER, 'shell', env], ptyEnv(), 24, 80);
      // busybox's prompt, then its cursor-position query.
      await sh.until(/# /);
      let mark = sh.out.length;
      sh.type('echo hi\r');
      // The remote terminal echoes the line; `hi` alone on a line is the command's output. (The local
      // terminal keeps its output processing: the remote's \r\n arrives as \r\r\n, which shows the same.)
      await sh.until(/\nhi\r+\n/, mark);
      mark = sh.out.length;
      sh.type('stty size\r');
      await sh.until(/\n24 80\r+\n/, mark);
      sh.resize(50, 132);
      // The resize travels on its own (SIGWINCH → svc → server → engine): ask until it has arrived.
      let size = '';
      for (let i = 0; i < 50 && size !== '50 132'; i++) {
        mark = sh.out.length;
        sh.type('stty size\r');
        size = (await sh.until(/\n(\d+ \d+)\r+\n/, mark))[1];
      }
      assert.equal(size, '50 132');
      sh.type('exit 3\r');
      const done = await sh.exited;
      assert.equal(done.code, 3, `${sh.out}\n${done.stderr}`);
      assert.ok(done.restored, 'the terminal is back in cooked mode with echo');
    },
  );

  test(
    'svc exec -it runs a command with a terminal; a signal is passed on, a second detaches and restores the terminal',
    STEP,
    async () => {
      const it = new Pty(
        [
          process.execPath,
          SVC,
          'exec',
          '-it',
          '--service',
          'app',
          env,
          '--',
          'sh',
          '-c',
          `${WHEN_SIZED}stty size; tty; exit 5`,
        ],
        ptyEnv(),
        30,
        100,
      );
      const done = await it.exited;
      assert.equal(done.code, 5, `${it.out}\n${done.stderr}`);
      assert.match(it.out, /30 100\r+\n\/dev\/pts\/\d+/);
      assert.ok(done.restored);

      // A remote shell that ignores TERM: the first TERM reaches it and changes nothing, the second
      // detaches svc (128 + 15), and the terminal is restored on that path as well.
      const stubborn = new Pty(
        [
          process.execPath,
          SVC,
          'exec',
          '-it',
          '--service',
          'app',
          env,
          '--',
          'sh',
          '-c',
          "trap '' TERM; echo ready; sleep 1000",
        ],
        ptyEnv(),
        24,
        80,
      );
      await stubborn.until(/ready/);
      stubborn.signal('TERM');
      // Two signals sent at once may arrive as one: the second goes once the first was handled.
      await stubborn.until(/passed SIGTERM to proc_\S+; another signal detaches svc from it/);
      stubborn.signal('TERM');
      const gone = await stubborn.exited;
      assert.equal(gone.code, 143, `${stubborn.out}\n${gone.stderr}`);
      assert.match(stubborn.out, /detached from proc_\S+ after SIGTERM; it may still run: svc ps/);
      assert.ok(gone.restored);
    },
  );

  test(
    'svc exec -i feeds piped stdin and keeps stdout and stderr apart; the exit code passes through',
    STEP,
    async () => {
      // More than one input chunk (64 KiB), so the chunks must arrive whole and in order.
      const input = Buffer.from(`line one\n${randomBytes(150 * 1024).toString('base64')}\nlast\n`);
      const r1 = await svcBytes(
        ['exec', '-i', '--service', 'app', env, '--', 'sh', '-c', 'cat; echo err >&2; exit 4'],
        cliEnv,
        input,
      );
      assert.equal(r1.code, 4, r1.stderr);
      assert.ok(r1.stdout.equals(input), `stdout: ${r1.stdout.length} bytes, sent ${input.length}`);
      assert.equal(r1.stderr, 'err\n');
    },
  );

  test('svc ps lists a background process, svc kill ends it, errors name what is unknown', STEP, async () => {
    const pid = await start(r.t, env, { service: 'app', cmd: ['sleep', '1000'] });
    const table = await run(['ps', env]);
    assertExit(table, 0);
    const row = table.stdout.split('\n').find((l) => l.startsWith(pid));
    assert.ok(row, table.stdout);
    assert.match(row, new RegExp(`^${pid}\\s+app\\s+running\\s+\\S+Z\\s+sleep 1000$`));
    assert.match(table.stdout, /^PID\s+SERVICE\s+STATUS\s+EXIT\s+STARTED\s+COMMAND$/m);
    const json = await run(['ps', '--json', env]);
    assertExit(json, 0);
    const listed = JSON.parse(json.stdout).processes.find((p: { pid: string }) => p.pid === pid);
    assert.equal(listed.status, 'running');

    assertExit(await run(['kill', '--signal', 'sigkill', env, pid]), 0);
    let one = await r.t.req('GET', `/v1/envs/${env}/processes/${pid}`);
    for (let i = 0; i < 200 && one.body.status === 'running'; i++) {
      await new Promise((res) => setTimeout(res, 50));
      one = await r.t.req('GET', `/v1/envs/${env}/processes/${pid}`);
    }
    assert.equal(one.body.status, 'exited');
    assert.equal(one.body.signal, 'KILL');
    const after = await run(['ps', env]);
    assert.match(after.stdout, new RegExp(`^${pid}\\s+app\\s+exited\\s+SIGKILL\\s`, 'm'));

    assertFails(await run(['kill', env, 'proc_nope']), /no such process/);
    assertFails(await run(['ps', 'env_nope']), /not found/);
    const usage = await run(['kill', '--signal', 'BOGUS', env, pid]);
    assertExit(usage, 2);
    assert.match(usage.stderr, /unknown signal 'BOGUS'/);
    const shell = await run(['shell', 'env_nope']);
    assertFails(shell, /not found/);
    const attach = await run(['exec', '-it', '--service', 'nope', env, 'sh']);
    assertFails(attach, /nope/);
  });

  test('svc fs put, cat, ls and rm round-trip the exact bytes', STEP, async () => {
    const dir = tempDir('svc-fs-');
    const local = join(dir, 'blob.bin');
    const bytes = randomBytes(700 * 1024);
    writeFileSync(local, bytes);
    const put = await run(['fs', 'put', '--mode', '600', env, local, '/tmp/cli/blob.bin']);
    assertExit(put, 0);
    assert.deepEqual(JSON.parse(put.stdout), { path: '/tmp/cli/blob.bin', size: bytes.length });
    const cat = await svcBytes(['fs', 'cat', '--service', 'app', env, '/tmp/cli/blob.bin'], cliEnv);
    assert.equal(cat.code, 0, cat.stderr);
    assert.ok(cat.stdout.equals(bytes), `cat gave ${cat.stdout.length} bytes of ${bytes.length}`);

    const ls = await run(['fs', 'ls', env, '/tmp']);
    assertExit(ls, 0);
    assert.match(ls.stdout, /^dir\s+\d{4}\s+\d+\s+\S+Z\s+\/tmp\/cli\/$/m);
    assert.doesNotMatch(ls.stdout, /blob\.bin/);
    const deep = await run(['fs', 'ls', '--depth', '2', env, '/tmp']);
    assert.match(
      deep.stdout,
      new RegExp(`^file\\s+0600\\s+${bytes.length}\\s+\\S+Z\\s+/tmp/cli/blob\\.bin$`, 'm'),
    );
    const json = await run(['fs', 'ls', '--json', '--service', 'app', env, '/tmp/cli']);
    const entry = JSON.parse(json.stdout).entries.find((e: { name: string }) => e.name === 'blob.bin');
    assert.equal(entry.size, bytes.length);

    // An empty file is a file too.
    writeFileSync(join(dir, 'empty'), '');
    assertExit(await run(['fs', 'put', env, join(dir, 'empty'), '/tmp/cli/empty']), 0);
    assert.equal((await svcBytes(['fs', 'cat', env, '/tmp/cli/empty'], cliEnv)).stdout.length, 0);

    assertExit(await run(['fs', 'rm', env, '/tmp/cli']), 0);
    assertFails(
      await run(['fs', 'cat', env, '/tmp/cli/blob.bin']),
      "/tmp/cli/blob.bin does not exist in service 'app'",
    );
    assertFails(await run(['fs', 'put', env, join(dir, 'missing'), '/tmp/x']), 'cannot read');
    assertFails(await run(['fs', 'put', env, dir, '/tmp/x']), 'not a regular file');
    assertFails(await run(['fs', 'ls', 'env_nope', '/']), /not found/);
    assert.equal(readFileSync(local).length, bytes.length);
  });
});
