// Subnet allocation: small subnets from the configured range, no overlap (with each other or with
// the engine's networks), stable per environment, released, and the same after a restart.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { dockerClient } from './engine.ts';
import { DockerError } from './errors.ts';
import { dockerSubnets, formatCidr, parseCidr, SubnetAllocator } from './subnets.ts';
import { cleanupTestEnvs, svc, testEnv } from './testing.ts';

function overlap(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  return x.base < y.base + 2 ** (32 - y.prefix) && y.base < x.base + 2 ** (32 - x.prefix);
}

describe('subnet allocation', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-subnets-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const make = (envsDir: string, taken: string[] = [], range = '10.99.0.0/24', prefix = 28) =>
    new SubnetAllocator({ envsDir, range, prefix, taken: async () => taken });

  it('parses and formats CIDRs, refusing what is not one', () => {
    assert.equal(formatCidr(parseCidr('10.213.0.0/16')), '10.213.0.0/16');
    for (const bad of ['10.0.0.1/16', '10.0.0.0', '300.0.0.0/8', '10.0.0.0/33', 'a.b.c.d/8', '10.0.0.0/8/1'])
      assert.throws(() => parseCidr(bad), DockerError, bad);
  });

  it('gives 14 concurrent environments (all a /24 holds besides one taken /27) distinct, non-overlapping subnets inside the range, skipping the engine’s', async () => {
    const alloc = make(join(dir, 'a'), ['10.99.0.0/27', '172.17.0.0/16']);
    const envs = Array.from({ length: 14 }, (_, i) => `env_${i}`);
    const got = await Promise.all(envs.map((e) => alloc.allocate(e)));
    for (let i = 0; i < got.length; i++) {
      assert.ok(overlap(got[i], '10.99.0.0/24'), `${got[i]} inside the range`);
      assert.equal(parseCidr(got[i]).prefix, 28);
      assert.ok(!overlap(got[i], '10.99.0.0/27'), `${got[i]} skips a network the engine has`);
      for (let j = i + 1; j < got.length; j++) assert.ok(!overlap(got[i], got[j]), `${got[i]} vs ${got[j]}`);
    }
    assert.equal(await alloc.allocate('env_3'), got[3], 'stable per environment');
    await assert.rejects(alloc.allocate('env_one_too_many'), /no free \/28 subnet left in 10\.99\.0\.0\/24/);
  });

  it('releases: a destroyed environment’s subnet is given out again', async () => {
    const alloc = make(join(dir, 'r'), [], '10.99.1.0/27', 28);
    const a = await alloc.allocate('env_a');
    const b = await alloc.allocate('env_b');
    await assert.rejects(alloc.allocate('env_c'), /no free/);
    await alloc.release('env_a');
    assert.equal(await alloc.allocate('env_c'), a);
    rmSync(join(dir, 'r', 'env_b'), { recursive: true }); // destroy removes the env's directory
    assert.equal(await alloc.allocate('env_d'), b);
  });

  it('is the same after a restart: allocations come from the environments’ state', async () => {
    const envs = join(dir, 's');
    const first = await make(envs).allocate('env_keep');
    const other = await make(envs).allocate('env_other');
    const restarted = make(envs);
    assert.equal(await restarted.allocate('env_keep'), first);
    assert.notEqual(other, first);
    assert.deepEqual([...(await restarted.allocations()).entries()].sort(), [
      ['env_keep', first],
      ['env_other', other],
    ]);
  });

  it('sidecars that share an engine but not their records spread out instead of all taking the lowest free subnet', async () => {
    const picks = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        make(join(dir, `side${i}`), [], '10.99.0.0/16', 28).allocate('env_same'),
      ),
    );
    // First-free gave all 20 the same subnet; 20 random slots of 4,096 are almost surely distinct.
    assert.ok(new Set(picks).size >= 15, picks.join(' '));
  });

  it('refuses a prefix that does not fit the range', () => {
    assert.throws(() => make(dir, [], '10.99.0.0/24', 20), /must lie between/);
  });
});

describe('subnet allocation on a real engine', { skip: tier('docker') }, () => {
  before(() => ensureTestImages());
  after(cleanupTestEnvs);

  it('the stack network gets the allocated subnet, and the engine’s networks are skipped', async () => {
    const envsDir = mkdtempSync(join(tmpdir(), 'svc-subnets-real-'));
    const real = new SubnetAllocator({ envsDir, range: '10.214.0.0/16', prefix: 28, docker: dockerClient() });
    const spec = { egress: 'allow' as const, volumes: [], services: [svc('app', BUSYBOX_IMAGE)] };
    const one = await testEnv('sn', spec, 'v2', { subnets: real });
    const two = await testEnv('sn', spec, 'v2', { subnets: real });
    await Promise.all([one.stack.up(60), two.stack.up(60)]);
    const subnetOf = async (network: string) =>
      (await one.stack.engine.docker.getNetwork(network).inspect()).IPAM?.Config?.[0]?.Subnet as string;
    const [a, b] = [await subnetOf(one.stack.network), await subnetOf(two.stack.network)];
    assert.equal(a, await real.recorded(one.stack.envId));
    assert.equal(b, await real.recorded(two.stack.envId));
    assert.ok(!overlap(a, b));
    // A third allocator with no records still sees both networks on the engine.
    const fresh = new SubnetAllocator({
      envsDir: join(envsDir, 'elsewhere'),
      range: '10.214.0.0/16',
      prefix: 28,
      docker: one.stack.engine.docker,
    });
    const c = await fresh.allocate('env_x');
    assert.ok(!overlap(c, a) && !overlap(c, b), `${c} vs ${a}, ${b}`);
    rmSync(envsDir, { recursive: true, force: true });
  });

  it('a subnet another sidecar took a moment earlier ("Pool overlaps") is given up and a free one allocated', async () => {
    const envsDir = mkdtempSync(join(tmpdir(), 'svc-subnets-race-'));
    const docker = dockerClient();
    // Two /28 slots. Sidecar A sees the upper one as taken, so it takes the lower one.
    const range = '10.215.0.0/27';
    const [lower, upper] = ['10.215.0.0/28', '10.215.0.16/28'];
    const a = new SubnetAllocator({
      envsDir: join(envsDir, 'a'),
      range,
      prefix: 28,
      taken: async () => [upper],
    });
    // Sidecar B scanned before A's network existed: its first look sees the same, later ones the engine.
    let looks = 0;
    const b = new SubnetAllocator({
      envsDir: join(envsDir, 'b'),
      range,
      prefix: 28,
      taken: async () => (looks++ === 0 ? [upper] : dockerSubnets(docker)),
    });
    const spec = { egress: 'allow' as const, volumes: [], services: [svc('app', BUSYBOX_IMAGE)] };
    const one = await testEnv('sr', spec, 'v2', { subnets: a });
    const two = await testEnv('sr', spec, 'v2', { subnets: b });
    await one.stack.up(60);
    await two.stack.up(60);
    const subnetOf = async (network: string) =>
      (await docker.getNetwork(network).inspect()).IPAM?.Config?.[0]?.Subnet as string;
    assert.equal(await subnetOf(one.stack.network), lower);
    assert.equal(
      await subnetOf(two.stack.network),
      upper,
      'B gave up the lower subnet and took the free one',
    );
    assert.equal(await b.recorded(two.stack.envId), upper);
    assert.ok(looks >= 2, 'B looked again after the collision');
    rmSync(envsDir, { recursive: true, force: true });
  });
});
