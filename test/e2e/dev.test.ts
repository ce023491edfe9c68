// `svc-server --dev`, the README's main job: the control plane on the embedded database joins
// this machine as a host through a local sidecar; a restart reuses that host. A newcomer's first
// run: the CLI the dev server serves, saved in a folder of their own and run by the machine's Node,
// deploys a stack whose context the local sidecar fetches from where the server listens.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { parseConfig } from '../../server/config/config.ts';
import { startServer } from '../../server/main.ts';
import { fsTier } from '../../sidecar/storage/fixtures.ts';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { assertExit, type Run, svc } from '../cli/harness.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { leftovers } from './real.ts';
import { systemNode } from './release-support.ts';

/** Downloads the CLI a server serves into `dir` as `svc`, executable, as the README says to. */
async function downloadCli(url: string, dir: string): Promise<string> {
  const r = await fetch(`${url}/svc-linux-amd64`);
  assert.equal(r.status, 200, await r.clone().text());
  const file = join(dir, 'svc');
  writeFileSync(file, Buffer.from(await r.arrayBuffer()));
  chmodSync(file, 0o755);
  return file;
}

/** `svc` as a newcomer runs it: the downloaded file, started by the machine's own Node on PATH. */
function runCli(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const home = join(file, '..');
  const path = `${join(systemNode().path, '..')}:/usr/bin:/bin`;
  return svc(args, { home, cwd: home, program: [file], env: { PATH: path, ...env }, timeoutMs: 300_000 });
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });

describe('svc-server --dev', { skip: tier('docker') }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-dev-'));
  let proc: ChildProcess | null = null;
  let out = '';
  after(async () => {
    // Killed outright: the local sidecar must notice and end too (it watches its parent).
    const p = proc;
    if (p && p.exitCode === null) {
      const gone = new Promise((r) => p.once('close', r));
      p.kill('SIGKILL');
      await gone;
    }
    // The local sidecar keeps its datasets on its own XFS image, mounted until taken down.
    await closeXfsLoop(join(dir, '.svc', 'data'));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (port: number) => {
    proc = spawn(
      process.execPath,
      [
        join(process.cwd(), 'programs/svc-server.ts'),
        '--dev',
        '-addr',
        `127.0.0.1:${port}`,
        '-db',
        join(dir, 'svc.db'),
      ],
      {
        cwd: dir,
        // --dev's E2B-compatible listener on a free port: 3049 may be held by another run.
        env: {
          ...process.env,
          SVC_BOOTSTRAP_KEY: '',
          SVC_DEV_DIR: join(dir, '.svc'),
          SVC_E2B_ADDR: '127.0.0.1:0',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    proc.stderr?.on('data', (d) => (out += d));
    proc.stdout?.on('data', (d) => (out += d));
  };
  const hosts = async (port: number, key: string) => {
    const r = await fetch(`http://127.0.0.1:${port}/v1/hosts`, {
      headers: { authorization: `Bearer ${key}` },
    }).catch(() => null);
    return r?.ok ? ((await r.json()) as { hosts: any[] }).hosts : [];
  };
  const until = async (cond: () => Promise<boolean>, what: string) => {
    const t0 = Date.now();
    while (!(await cond())) {
      assert.ok(Date.now() - t0 < 60_000, `timed out: ${what}\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  let port = 0;
  let key = '';

  test('joins this machine as a connected host; a restart reuses it; SIGTERM stops both', async () => {
    port = await freePort();
    await start(port);
    await until(async () => /dak_\S+/.test(out), 'bootstrap key');
    key = /bootstrap API key .*: (dak_\S+)/.exec(out)![1];
    assert.equal(readFileSync(join(dir, '.svc', 'dev-api-key'), 'utf8').trim(), key);
    await until(async () => (await hosts(port, key)).some((h) => h.connected), 'local host connected');
    const first = (await hosts(port, key))[0].ID;
    // --dev gives the local sidecar copy-on-write even on ext4: its own XFS image.
    const cow = (await hosts(port, key))[0].Capabilities.cow;
    // (On a temp dir that clones by itself it reports that instead.)
    if (fsTier('xfs') === false) assert.ok(['xfs-loop', 'reflink', 'btrfs'].includes(cow), `cow: ${cow}`);
    else assert.equal(cow, 'none');
    const p = proc!;
    const exited = new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
    p.kill('SIGTERM');
    assert.equal(await exited, 0);
    out = '';
    await start(port);
    await until(
      async () => (await hosts(port, key)).some((h) => h.connected),
      'host reconnected after restart',
    );
    const after = await hosts(port, key);
    assert.deepEqual(
      after.map((h) => h.ID),
      [first],
      'the same host, not a second one',
    );
    assert.doesNotMatch(out, /bootstrap API key/, 'the key is printed only on an empty database');
  });

  test("the served CLI, in a folder of its own on the machine's Node, deploys a stack with a context", async () => {
    await ensureTestImages();
    assert.match(out, new RegExp(`"public_url":"http://127\\.0\\.0\\.1:${port}"`), 'where it listens');
    const work = join(dir, 'newcomer');
    mkdirSync(join(work, 'data'), { recursive: true });
    const cli = await downloadCli(`http://127.0.0.1:${port}`, work);
    const env = { SVC_SERVER: `http://127.0.0.1:${port}`, SVC_API_KEY: key };
    const json = async (args: string[]) => {
      const r = await runCli(cli, args, env);
      assertExit(r, 0);
      return JSON.parse(r.stdout);
    };
    // A bind of a file beside the compose file: the deploy ships the folder as the project context.
    writeFileSync(join(work, 'data', 'hello.txt'), 'from the context\n');
    writeFileSync(
      join(work, 'compose.yaml'),
      `services:\n  main:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sleep", "1000000"]\n    volumes: ["./data:/data:ro"]\n`,
    );
    await json(['project', 'create', 'first']);
    const deploy = await runCli(cli, ['deploy', '--project', 'first', '-f', 'compose.yaml'], env);
    assertExit(deploy, 0);
    assert.match(deploy.stdout, /^deployment dep_\S+: succeeded$/m);
    const envId = (await json(['project', 'envs', 'first'])).environments.find(
      (e: any) => e.Name === 'alpha',
    ).ID;
    assert.deepEqual(await json(['exec', '--service', 'main', envId, '--', 'cat', '/data/hello.txt']), {
      exit_code: 0,
      stdout: 'from the context\n',
      stderr: '',
    });
    const destroy = await runCli(cli, ['env', 'destroy', envId], env);
    assertExit(destroy, 0);
    const watch = await runCli(cli, ['deployment', 'watch', /dep_[0-9a-z]+/.exec(destroy.stdout)![0]], env);
    assertExit(watch, 0);
    assert.deepEqual(leftovers(envId), []);
  });
});

describe('svc-server --dev serves the CLI when no release is built', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-dev-cli-'));
  const releases = join(dir, 'releases');
  mkdirSync(releases);
  const key = 'dak_devcli_test_key_0123456789';
  let server: Awaited<ReturnType<typeof startServer>> | null = null;
  after(async () => {
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("the file at /svc-linux-* runs on the machine's Node, in any folder, against the server", async () => {
    const argv = ['--dev', '-addr', '127.0.0.1:0', '-db', join(dir, 'svc.db')];
    server = await startServer(
      parseConfig(argv, { SVC_RELEASES_DIR: releases, SVC_BOOTSTRAP_KEY: key, SVC_E2B_ADDR: '127.0.0.1:0' }),
      {
        logger: false,
      },
    );
    const arm = await fetch(`${server.url}/svc-linux-arm64`);
    const armBytes = Buffer.from(await arm.arrayBuffer());
    assert.equal(arm.status, 200);
    assert.equal(arm.headers.get('content-length'), String(armBytes.length));
    assert.match(armBytes.toString('utf8', 0, 64), /^#!\/usr\/bin\/env node\n/);
    // A folder with no package.json, and one whose package.json makes extensionless files ES modules.
    for (const [name, pkg] of [
      ['plain', null],
      ['esm', '{"type": "module"}'],
    ] as const) {
      const folder = join(dir, name);
      mkdirSync(folder);
      if (pkg) writeFileSync(join(folder, 'package.json'), pkg);
      const cli = await downloadCli(server.url, folder);
      assert.deepEqual(readFileSync(cli), armBytes, 'one script for every architecture');
      const version = await runCli(cli, ['version']);
      assertExit(version, 0);
      assert.match(version.stdout, /^svc \S+\n$/);
      assertExit(await runCli(cli, ['no-such-verb']), 2);
      const whoami = await runCli(cli, ['whoami'], { SVC_SERVER: server.url, SVC_API_KEY: key });
      assertExit(whoami, 0);
      assert.equal(JSON.parse(whoami.stdout).team.Name, 'default', name);
    }
  });

  test('a built release in the releases directory is served instead', async () => {
    assert.ok(server);
    writeFileSync(join(releases, 'svc-linux-amd64'), 'a single executable');
    const r = await fetch(`${server.url}/svc-linux-amd64`);
    assert.equal(await r.text(), 'a single executable');
  });
});
