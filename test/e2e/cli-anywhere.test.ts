// The CLI away from the checkout: the single executable with no Node anywhere on PATH, the npm
// package installed globally and run by the machine's own Node (20 here), and the checkout's own bin
// (a launcher that runs the sources on the pinned Node) started by that same Node, each from a
// directory outside the repository, through login (approved by a console session) → init → deploy --wait → exec →
// verify, on a real server, a real sidecar and real Docker.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { packCli } from '../../release/npm-package.ts';
import { buildExecutable, hostArch } from '../../release/sea.ts';
import { approveWhenPrinted, assertExit, type RunOptions, removeDir, svc, tempDir } from '../cli/harness.ts';
import { ensureTemplateImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { type Real, startReal } from './real.ts';
import { systemNode } from './release-support.ts';

describe("svc outside the checkout: single executable, npm package, the checkout's bin", {
  skip: tier('docker'),
}, () => {
  let r: Real;
  let dir: string;
  let sea: string;
  let npmSvc: string;
  const node20 = systemNode();

  before(async () => {
    await ensureTemplateImages();
    dir = tempDir('svc-anywhere-');
    sea = await buildExecutable('svc', 'cli/main.ts', hostArch(), join(dir, 'rel'), 'anywhere-build');
    const tgz = await packCli(join(dir, 'rel'), 'anywhere-build');
    const prefix = join(dir, 'global');
    execFileSync('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', tgz], {
      env: { ...process.env, PATH: `${join(node20.path, '..')}:/usr/bin:/bin` },
      stdio: 'ignore',
    });
    npmSvc = join(prefix, 'bin', 'svc');
    r = await startReal({ env: { SVC_DEV_LOGIN: '1' }, join: false });
  });
  after(async () => {
    await r?.close();
    removeDir(dir);
  });

  test('the npm package is compiled JavaScript, no TypeScript sources', () => {
    const pkg = join(dir, 'global', 'lib', 'node_modules', 'svc-cli');
    assert.deepEqual(readdirSync(pkg).sort(), ['README.md', 'package.json', 'svc.cjs']);
  });

  async function journey(
    name: string,
    program: string[],
    pathDir: string,
    extraEnv: Record<string, string> = {},
  ) {
    const home = join(dir, `home-${name}`);
    const work = join(dir, `project-${name}`);
    mkdirSync(home);
    mkdirSync(work);
    const opts = (extra: Partial<RunOptions> = {}): RunOptions => ({
      home,
      cwd: work,
      env: { PATH: pathDir, ...extraEnv },
      program,
      timeoutMs: 300_000,
      ...extra,
    });
    const json = async (args: string[]) => {
      const out = await svc(args, opts());
      assertExit(out, 0);
      return JSON.parse(out.stdout);
    };
    assert.match((await svc(['version'], opts())).stdout, /^svc anywhere-build\n$/);

    const session = (
      await r.t.req('POST', '/auth/dev-login', { token: false, body: { email: 'grace@example.com' } })
    ).body.token;
    const me = (await r.t.req('GET', '/v1/me', { token: session })).body;
    const login = await svc(
      ['login', '--no-browser', '--server', r.t.url],
      opts({ onStdout: approveWhenPrinted(r.t, session, me.team.ID) }),
    );
    assertExit(login, 0);
    assert.equal((await json(['whoami'])).team.ID, me.team.ID);
    if (!r.sidecar) await r.startSidecar((await json(['host', 'join-token'])).token);

    await json(['project', 'create', name]);
    const init = await svc(['init', 'rl-environment-ops'], opts());
    assertExit(init, 0);
    const warm = /--warm '([^']+)'/.exec(init.stdout)?.[1];
    assert.ok(warm, init.stdout);
    const deploy = await svc(['deploy', '--project', name, '-f', 'compose.yaml', '--warm', warm], opts());
    assertExit(deploy, 0);
    assert.match(deploy.stdout, /^deployment dep_\S+: succeeded$/m);
    const env = (await json(['project', 'envs', name])).environments.find((e: any) => e.Name === 'alpha').ID;
    const solve = ['sh', '-c', 'grep -c level=ERROR /work/incident.log | tee /work/answer.txt'];
    assert.deepEqual(await json(['exec', '--service', 'main', env, '--', ...solve]), {
      exit_code: 0,
      stdout: '71\n',
      stderr: '',
    });
    const verify = await svc(['verify', env], opts());
    assertExit(verify, 0);
    assert.match(verify.stdout, /reward: 1\b/);
  }

  test('the single executable, with no Node on PATH', async () => {
    await journey('sea', [sea], join(dir, 'no-node-here'));
  });

  test(`the npm package on the machine's own Node (${node20.version})`, async () => {
    assert.notEqual(node20.path, process.execPath);
    await journey('npm', [node20.path, npmSvc], '/usr/bin:/bin');
  });

  test(`the checkout's bin started by the machine's own Node (${node20.version})`, async () => {
    const bin = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')).bin.svc;
    const launcher = resolve(import.meta.dirname, '../..', bin);
    // Sources have no build stamped in: they print SVC_BUILD_VERSION, as the builds above would.
    await journey('checkout', [node20.path, launcher], '/usr/bin:/bin', {
      SVC_BUILD_VERSION: 'anywhere-build',
    });
  });
});
