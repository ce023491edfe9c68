// The real svcd program against a fake control plane: identity, state file, heartbeats,
// idempotent replay of a command id, unknown kinds, reconnect, and 1008 being fatal.
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { exited, svcd, svcdJoinArgs, until } from '../support/svcd.ts';
import { tier } from '../support/tiers.ts';
import { FakeControlPlane } from './control-plane.ts';

test('svcd version prints the build version; bad usage exits 2', async () => {
  const v = svcd(['version']);
  assert.equal(await exited(v), 0);
  assert.equal(v.out().trim(), 'dev');
  const bad = svcd(['join', '--bogus']);
  assert.equal(await exited(bad), 2);
  assert.match(bad.out(), /usage:/);
  const noState = svcd(['run', '--server', 'http://127.0.0.1:1', '--state', '/nonexistent/host.json']);
  assert.equal(await exited(noState), 2);
  assert.match(noState.out(), /no saved identity/);
});

describe('svcd against a fake control plane', { skip: tier('docker') }, () => {
  let cp: FakeControlPlane;
  let dir: string;
  let child: ReturnType<typeof svcd> | null = null;
  before(async () => {
    cp = await new FakeControlPlane().listen();
    dir = mkdtempSync(join(tmpdir(), 'svcd-proto-'));
  });
  after(async () => {
    child?.kill('SIGKILL');
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('first join presents the token and saves the identity (0600); the token is never persisted', async () => {
    child = svcd(svcdJoinArgs(cp.url, 'djt_abc', dir).slice(1));
    await until(() => cp.hellos.length === 1, 20_000, 'hello');
    const hello = cp.hellos[0].payload as any;
    assert.equal(hello.host_id, '');
    assert.equal(hello.token, 'djt_abc');
    for (const k of [
      'hostname',
      'os',
      'arch',
      'cpus',
      'memory_mb',
      'disk_gb',
      'storage',
      'docker',
      'compose',
      'netns',
      'denvd_version',
    ]) {
      assert.ok(k in hello.capabilities, k);
    }
    assert.equal(hello.capabilities.compose, true);
    assert.match(hello.capabilities.docker, /\d+\.\d+/);
    await until(() => existsSync(join(dir, 'host.json')), 10_000, 'state file');
    const state = JSON.parse(readFileSync(join(dir, 'host.json'), 'utf8'));
    assert.deepEqual(state, {
      server: cp.url,
      host_id: 'host_fake1',
      secret: 'dhs_fakesecret',
      data_dir: join(dir, 'data'),
      zfs_pool: '',
    });
    assert.equal(statSync(join(dir, 'host.json')).mode & 0o777, 0o600);
    assert.ok(!readFileSync(join(dir, 'host.json'), 'utf8').includes('djt_abc'));
  });

  test('unknown kinds are refused; a command id seen again is answered from its stored result', async () => {
    cp.send('cmd_u1', 'egress.set', 'env_x', {});
    const u = await cp.result('cmd_u1');
    assert.deepEqual([u.ok, u.error], [false, 'unknown command kind']);
    assert.ok(cp.frames.some((f) => f.type === 'ack' && f.command_id === 'cmd_u1'));
    cp.send('cmd_r1', 'host.report', '', {});
    const r1 = await cp.result('cmd_r1');
    assert.equal(r1.ok, true);
    assert.ok((r1.payload as any).capabilities.hostname);
    assert.deepEqual((r1.payload as any).environments, []);
    const stored = JSON.parse(readFileSync(join(dir, 'data', 'commands', 'cmd_r1.json'), 'utf8'));
    assert.equal(stored.ok, true);
    cp.send('cmd_r1', 'host.report', '', {});
    const r2 = await cp.result('cmd_r1', 10_000, 2);
    assert.deepEqual(r2.payload, r1.payload, 'the replay is the stored result, not a new run');
    // An id that cannot name a result file is refused at once, not dropped without an answer.
    cp.send('cmd/../x', 'host.report', '', {});
    const bad = await cp.result('cmd/../x');
    assert.deepEqual([bad.ok, bad.error], [false, 'invalid command id']);
    assert.ok(!existsSync(join(dir, 'data', 'x.json')));
  });

  test('the stream drops: it reconnects with its saved identity; a 1008 refusal makes it exit non-zero', async () => {
    const before = cp.connections;
    cp.socket?.terminate();
    await until(() => cp.connections > before && cp.hellos.length >= 2, 20_000, 'reconnect');
    const hello = cp.hellos.at(-1)!.payload as any;
    assert.equal(hello.host_id, 'host_fake1');
    assert.equal(hello.token, 'dhs_fakesecret');
    cp.refuse = 'join: join token already used';
    cp.socket?.terminate();
    const code = await exited(child!);
    assert.notEqual(code, 0);
    assert.match(child!.out(), /join token already used/);
  });
});

/** A PATH with every tool of this machine except the compose tools (and the docker CLI, whose plugin is v2). */
function pathWithoutCompose(root: string): string {
  const bin = join(root, 'bin');
  mkdirSync(bin);
  for (const d of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    if (!existsSync(d)) continue;
    for (const name of readdirSync(d)) {
      if (name === 'docker' || name === 'docker-compose' || existsSync(join(bin, name))) continue;
      symlinkSync(join(d, name), join(bin, name));
    }
  }
  return bin;
}

// test-images: named only (the env.create below is refused for want of a compose tool before any
// container exists; the suite above runs no image).
describe('svcd on a machine without a compose tool', { skip: tier('docker') }, () => {
  test('it still joins and reports compose: false; stack commands fail with the way out and make no dataset', async () => {
    const cp = await new FakeControlPlane().listen();
    const dir = mkdtempSync(join(tmpdir(), 'svcd-nocompose-'));
    let child: ReturnType<typeof svcd> | null = null;
    try {
      child = svcd(svcdJoinArgs(cp.url, 'djt_abc', dir).slice(1), {
        PATH: pathWithoutCompose(dir),
        SVC_COMPOSE: '',
      });
      await until(() => cp.hellos.length === 1, 20_000, `hello\n${child.out()}`);
      assert.equal((cp.hellos[0].payload as any).capabilities.compose, false);
      const service = {
        name: 'app',
        image: 'svc-test/busybox:latest',
        env: {},
        ports: [],
        volumes: ['work:/work'],
      };
      cp.send('cmd_nc1', 'env.create', 'env_nocompose', {
        version: 'ver_1',
        services: [service],
        volumes: ['work'],
        egress: 'deny',
      });
      const r = await cp.result('cmd_nc1');
      assert.equal(r.ok, false);
      assert.match(
        r.error!,
        /^no compose tool on this machine: install the docker compose plugin or docker-compose/,
      );
      assert.ok(!existsSync(join(dir, 'data', 'envs', 'env_nocompose')), 'no dataset was prepared');
    } finally {
      child?.kill('SIGKILL');
      await cp.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
