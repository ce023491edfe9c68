// A fresh stack is created through the Engine API, not the compose CLI: the containers, network
// and volumes must be what compose would have made from the same rendered document (everything
// Docker reports of them, the project's name aside), and a project that exists already, or a
// document only compose can read, still goes through compose.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { CONTEXT_VOLUME, type ServiceRecord } from '../../protocol/spec.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { durationNs, parsePort, untranslatable } from './engine-create.ts';
import { composeDocument } from './render.ts';
import type { StackSpec } from './stack.ts';
import { cleanupTestEnvs, IDLE, svc, testEnv } from './testing.ts';

const docker = new Docker();

describe('Engine-API create: the pure parts', () => {
  it('reads Go durations without a regular expression, and refuses what is not one', () => {
    assert.equal(durationNs('1s'), 1e9);
    assert.equal(durationNs('1m30s'), 90e9);
    assert.equal(durationNs('500ms'), 5e8);
    assert.equal(durationNs('2.5s'), 2.5e9);
    assert.equal(durationNs('1h'), 3600e9);
    for (const bad of ['', 's', '10', '1x', '1s2', '-1s', 'x'.repeat(100)])
      assert.equal(durationNs(bad), null, bad);
  });

  it('reads the ports the spec keeps; ranges and host addresses are left to compose', () => {
    assert.deepEqual(parsePort('8080'), { published: '', key: '8080/tcp' });
    assert.deepEqual(parsePort('18080:80/udp'), { published: '18080', key: '80/udp' });
    for (const bad of ['8000-8010', '127.0.0.1:80:80', '80/tcp/x', '80/icmp', ':80', '123456'])
      assert.equal(parsePort(bad), null, bad);
  });

  it('a document with anything it does not translate goes to compose', () => {
    const input = (over: Partial<ServiceRecord>) => ({
      envId: 'env_parity',
      egress: 'allow' as const,
      volumes: [],
      volumePaths: {},
      services: [svc('a', BUSYBOX_IMAGE, over)],
    });
    assert.equal(untranslatable(composeDocument(input({}))), null);
    assert.match(String(untranslatable(composeDocument(input({ command: 'sleep 1' })))), /argv as text/);
    assert.match(String(untranslatable(composeDocument(input({ ports: ['8000-8001'] })))), /port/);
    const doc = composeDocument(input({}));
    (doc.services as Record<string, Record<string, unknown>>).a.cap_add = ['NET_ADMIN'];
    assert.match(String(untranslatable(doc)), /cap_add/);
  });
});

/** Everything Docker reports of a container that its create decided, with the project's name as `P`. */
async function describeContainer(project: string, service: string) {
  const [info] = await docker.listContainers({
    all: true,
    filters: { label: [`com.docker.compose.project=${project}`, `com.docker.compose.service=${service}`] },
  });
  const c = await docker.getContainer(info.Id).inspect();
  const labels = { ...c.Config.Labels };
  // Compose's own bookkeeping of its file and its hashes: nothing reads them back.
  for (const k of ['config-hash', 'image', 'project.config_files', 'project.working_dir'])
    delete labels[`com.docker.compose.${k}`];
  const h = c.HostConfig as Record<string, unknown>;
  const net = c.NetworkSettings.Networks[`${project}_default`];
  const text = JSON.stringify({
    name: c.Name,
    // Compose orders the environment as Go's map iteration does: at random.
    config: { ...c.Config, Hostname: '', Labels: labels, Env: [...(c.Config.Env ?? [])].sort() },
    // Compose's order of binds and mounts is not stable either.
    host: { ...h, Mounts: h.Mounts ?? [], Binds: h.Binds ? [...(h.Binds as string[])].sort() : null },
    // Docker adds the container's short id as an alias of its own.
    aliases: net?.Aliases?.filter((a: string) => a !== c.Id.slice(0, 12)),
    mounts: c.Mounts.map((m) => ({ ...m, Source: m.Type === 'volume' ? '' : m.Source })).sort((a, b) =>
      a.Destination.localeCompare(b.Destination),
    ),
  });
  return JSON.parse(text.replaceAll(project, 'P'));
}

async function describeProject(project: string, dir: string) {
  const [n] = await docker.listNetworks({ filters: { label: [`com.docker.compose.project=${project}`] } });
  const net = await docker.getNetwork(n.Id).inspect();
  const { Volumes } = await docker.listVolumes({
    filters: { label: [`com.docker.compose.project=${project}`] },
  });
  const text = JSON.stringify({
    network: {
      Name: net.Name,
      Internal: net.Internal,
      Options: net.Options,
      IPAM: net.IPAM,
      Labels: net.Labels,
    },
    volumes: (Volumes ?? [])
      .map((v) => ({ Name: v.Name, Driver: v.Driver, Labels: v.Labels, Options: v.Options }))
      .sort((a, b) => a.Name.localeCompare(b.Name)),
  });
  return JSON.parse(text.replaceAll(project, 'P').replaceAll(dir, 'D'));
}

describe('Engine-API create against compose', { skip: tier('docker') }, () => {
  const dirs: string[] = [];
  before(() => ensureTestImages());
  after(async () => {
    await cleanupTestEnvs();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const spec = (): StackSpec => ({
    egress: 'allow',
    volumes: ['data', 'more', CONTEXT_VOLUME],
    services: [
      svc('a', BUSYBOX_IMAGE, {
        env: { PLAIN: 'x', DOLLAR: 'a$b$$c', EMPTY: '' },
        ports: ['8080', '80/udp'],
        volumes: ['data:/data', 'more:/more:ro'],
        binds: [{ source: 'conf', target: '/conf', read_only: true }],
        health: {
          test: ['CMD-SHELL', 'test -d /data && echo $$HOME'],
          interval: '1s',
          timeout: '1m30s',
          retries: 3,
          start_period: '500ms',
        },
        entrypoint: ['sh', '-c'],
        command: [IDLE],
        user: '1000:1000',
        working_dir: '/tmp',
        resources: { memory_mb: 300, pids: 77, cpus: 0.5 },
      }),
      svc('b', BUSYBOX_IMAGE, {
        depends_on: { a: { condition: 'service_healthy' } },
        health: { test: ['NONE'], interval: '', retries: 0 },
      }),
    ],
  });

  async function made(tag: string, composeCreate: boolean) {
    const stageDir = mkdtempSync(join(tmpdir(), 'svc-stage-'));
    dirs.push(stageDir);
    const env = await testEnv(tag, spec(), 'v2', { stageDir, composeCreate });
    // The project context's files are under `files/` of its dataset.
    mkdirSync(join(env.paths[CONTEXT_VOLUME], 'files', 'conf'), { recursive: true });
    writeFileSync(join(env.paths[CONTEXT_VOLUME], 'files', 'conf', 'x'), 'hello');
    await env.stack.up(120);
    return env;
  }

  it('makes the containers, network and volumes compose makes from the same document', async () => {
    const viaCompose = await made('pcc', true);
    const viaEngine = await made('pce', false);
    for (const service of ['a', 'b']) {
      const want = await describeContainer(viaCompose.stack.project, service);
      const got = await describeContainer(viaEngine.stack.project, service);
      // Dataset and staging paths differ per environment by construction: compared by shape.
      const paths = (d: { host: { Mounts: { Source: string }[] } }) =>
        d.host.Mounts.map((m) => m.Source.split('/').slice(0, 2).join('/'));
      assert.deepEqual(paths(got), paths(want));
      for (const d of [want, got]) {
        d.host.Mounts = d.host.Mounts.map((m: object) => ({ ...m, Source: '' }));
        d.mounts = d.mounts.map((m: object) => ({ ...m, Source: '' }));
      }
      assert.deepEqual(got, want, `service ${service}`);
    }
    const want = await describeProject(viaCompose.stack.project, viaCompose.dir);
    const got = await describeProject(viaEngine.stack.project, viaEngine.dir);
    // Each network has its own bridge name and subnet (from the env id, Docker's pools): by shape.
    for (const d of [want, got]) {
      d.network.Options = Object.keys(d.network.Options);
      d.network.IPAM.Config = d.network.IPAM.Config.map((c: object) => Object.keys(c).sort());
    }
    assert.deepEqual(got, want);
    // The data is where the stack's datasets are, and the bind is what was staged.
    writeFileSync(join(viaEngine.paths.data, 'y'), ' there');
    const out = await viaEngine.stack.engine.exec('a', ['cat', '/conf/x', '/data/y']);
    assert.equal(out.stdout, 'hello there', JSON.stringify(out));
  });

  it('a project that exists already is recreated by compose, as before', async () => {
    const env = await made('pex', false);
    const before = (await env.stack.engine.containers()).map((c) => c.id);
    await env.stack.up(120);
    const after = await env.stack.engine.containers();
    assert.equal(after.length, 2);
    assert.ok(after.every((c) => !before.includes(c.id) && c.state === 'running'));
  });

  it("network mode 'none': the container compose makes, and neither makes a network", async () => {
    const none = (): StackSpec => ({
      egress: 'deny',
      network: 'none',
      volumes: ['data'],
      services: [svc('main', BUSYBOX_IMAGE, { command: ['sh', '-c', IDLE], volumes: ['data:/data'] })],
    });
    const [viaCompose, viaEngine] = await Promise.all([
      testEnv('pnc', none(), 'v2', { composeCreate: true }),
      testEnv('pne', none(), 'v2', { composeCreate: false }),
    ]);
    await Promise.all([viaCompose.stack.up(120), viaEngine.stack.up(120)]);
    const want = await describeContainer(viaCompose.stack.project, 'main');
    const got = await describeContainer(viaEngine.stack.project, 'main');
    for (const d of [want, got]) {
      d.host.Mounts = d.host.Mounts.map((m: object) => ({ ...m, Source: '' }));
      d.mounts = d.mounts.map((m: object) => ({ ...m, Source: '' }));
    }
    assert.deepEqual(got, want);
    assert.equal(got.host.NetworkMode, 'none');
    for (const env of [viaCompose, viaEngine]) {
      const nets = await docker.listNetworks({
        filters: { label: [`com.docker.compose.project=${env.stack.project}`] },
      });
      assert.deepEqual(nets, []);
    }
  });
});
