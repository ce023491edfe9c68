// The journey a new user takes, with the CLI only, on a real server, a real sidecar and real
// Docker: login (approved through the API by a session) → host join-token → project create →
// init → deploy --wait → exec → files put/get → snapshot → change state → rollback → fork →
// verify (reward from the verdict) → env destroy.
import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { approveWhenPrinted, assertExit, removeDir, svc, tempDir } from '../cli/harness.ts';
import { ensureTemplateImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { type Real, startReal } from './real.ts';

describe('the new user journey, CLI only', { skip: tier('docker') }, () => {
  let r: Real;
  let home: string;
  const run = (args: string[], timeoutMs = 300_000) => svc(args, { home, cwd: home, env: {}, timeoutMs });
  const json = async (args: string[]) => {
    const out = await run(args);
    assertExit(out, 0);
    return JSON.parse(out.stdout);
  };

  before(async () => {
    await ensureTemplateImages();
    r = await startReal({ env: { SVC_DEV_LOGIN: '1' }, join: false });
    home = tempDir('svc-journey-');
  });
  after(async () => {
    await r?.close();
    removeDir(home);
  });

  test('from login to destroy', async () => {
    // login --no-browser; the approval comes from a console session through the API.
    const session = (
      await r.t.req('POST', '/auth/dev-login', {
        token: false,
        body: { email: 'ada@example.com', name: 'Ada' },
      })
    ).body.token;
    const me = (await r.t.req('GET', '/v1/me', { token: session })).body;
    const login = await svc(['login', '--no-browser', '--server', r.t.url], {
      home,
      env: {},
      onStdout: approveWhenPrinted(r.t, session, me.team.ID),
    });
    assertExit(login, 0);
    const configPath = join(home, '.config', 'svc', 'config.json');
    assert.match(
      login.stdout,
      new RegExp(`Signed in to team ${me.team.Name}\\. Key saved to ${configPath.replace(/\//g, '\\/')}\\.`),
    );
    assert.equal(statSync(configPath).mode & 0o777, 0o600);
    assert.equal(JSON.parse(readFileSync(configPath, 'utf8')).server, r.t.url);
    assert.equal((await json(['whoami'])).team.ID, me.team.ID);

    // This machine joins the user's team as a host with the printed token.
    const jt = await json(['host', 'join-token']);
    assert.match(jt.command, /\/install\.sh \| sudo sh -s -- --server /);
    await r.startSidecar(jt.token);
    assert.equal((await json(['host', 'list'])).hosts[0].connected, true);

    await json(['project', 'create', 'ops']);
    const init = await run(['init', 'rl-environment-ops']);
    assertExit(init, 0);
    const warm = /--warm '([^']+)'/.exec(init.stdout)?.[1];
    assert.ok(warm, init.stdout);
    assert.equal((await run(['init', 'rl-environment-ops'])).code, 1, 'init refuses to overwrite');

    const deploy = await run(['deploy', '--project', 'ops', '-f', 'compose.yaml', '--warm', warm]);
    assertExit(deploy, 0);
    assert.match(deploy.stdout, /^deployment dep_\S+: succeeded$/m);
    for (const phase of ['resolve', 'place', 'prepare', 'health', 'warm', 'snapshot', 'verdict'])
      assert.match(deploy.stdout, new RegExp(`\\b${phase}\\b`));
    const env = (await json(['project', 'envs', 'ops'])).environments.find((e: any) => e.Name === 'alpha').ID;

    const solve = await json([
      'exec',
      '--service',
      'main',
      env,
      '--',
      'sh',
      '-c',
      'grep -c level=ERROR /work/incident.log | tee /work/answer.txt',
    ]);
    assert.deepEqual(solve, { exit_code: 0, stdout: '71\n', stderr: '' });

    writeFileSync(join(home, 'notes.txt'), 'my notes\n');
    assertExit(await run(['files', 'put', '--service', 'main', env, 'notes.txt', '/work']), 0);
    const got = await run(['files', 'get', '--service', 'main', env, '/work/notes.txt', 'out']);
    assertExit(got, 0);
    assert.match(got.stdout, /1 files written under out/);
    assert.equal(readFileSync(join(home, 'out', 'notes.txt'), 'utf8'), 'my notes\n');

    const snap = await run(['snapshot', env]);
    assertExit(snap, 0);
    const version = /version: (ver_\S+)/.exec(snap.stdout)?.[1];
    assert.ok(version, snap.stdout);
    await json(['exec', '--service', 'main', env, 'sh', '-c', 'echo wrong > /work/answer.txt']);
    assertExit(await run(['rollback', env, version]), 0);
    assert.equal((await json(['exec', '--service', 'main', env, 'cat', '/work/answer.txt'])).stdout, '71\n');

    const fork = await run(['fork', env]);
    assertExit(fork, 0);
    const forkEnv = /environment: (env_\S+)/.exec(fork.stdout)?.[1];
    assert.ok(forkEnv, fork.stdout);
    await json(['exec', '--service', 'main', forkEnv, 'sh', '-c', 'echo fork > /work/answer.txt']);
    assert.equal(
      (await json(['exec', '--service', 'main', env, 'cat', '/work/answer.txt'])).stdout,
      '71\n',
      'the fork is independent',
    );

    const verify = await run(['verify', env]);
    assertExit(verify, 0);
    assert.match(verify.stdout, /reward: 1\b/);

    for (const e of [forkEnv, env]) {
      const d = await json(['env', 'destroy', e]);
      assertExit(await run(['deployment', 'watch', d.deployment.ID]), 0);
      assert.equal((await json(['env', 'get', e])).environment.Status, 'destroyed');
    }
  });
});
