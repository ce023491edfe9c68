// Built images are collected on real Docker without ever removing one that may still run: an
// image named by an environment's spec or by a version it can roll back to, one a container uses,
// one an env.create in progress holds, another sidecar's, or one younger than the keep bound stays;
// an unused old one goes, and a held one goes once released.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { buildImages } from './build.ts';
import { BuildImages, buildOwner } from './build-gc.ts';
import { dockerClient } from './engine.ts';

const docker = dockerClient();
const builds = new BuildImages();
const root = mkdtempSync(join(tmpdir(), 'svc-build-gc-'));
const dataDir = join(root, 'data');
const container = `svc-build-gc-test-${randomBytes(4).toString('hex')}`;
const tags: Record<string, string> = {};
const NAMES = ['spec', 'version', 'held', 'container', 'unused', 'other'] as const;

const exists = async (image: string) =>
  docker
    .getImage(image)
    .inspect()
    .then(() => true)
    .catch(() => false);

async function build(name: string, owner: string): Promise<void> {
  const dir = join(root, `ctx-${name}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'Dockerfile'),
    `FROM ${BUSYBOX_IMAGE}\nLABEL svc.test.gc=${randomBytes(8).toString('hex')}\n`,
  );
  tags[name] = `svc-build:${randomBytes(32).toString('hex')}`;
  const svc = {
    name,
    image: tags[name],
    build: { context: '', dockerfile: 'Dockerfile', args: {}, target: '' },
  } as unknown as ServiceRecord;
  await buildImages(docker, [svc], dir, () => {}, 'deny', owner);
}

const spec = (image: string) =>
  JSON.stringify({ services: [{ name: 'app', image }], volumes: [], egress: 'deny' });

describe('collecting built images', { skip: tier('docker') }, () => {
  before(async () => {
    await ensureTestImages();
    const owner = buildOwner(dataDir);
    for (const n of NAMES) await build(n, n === 'other' ? buildOwner(join(root, 'another-sidecar')) : owner);
    mkdirSync(join(dataDir, 'envs', 'env_a', 'versions'), { recursive: true });
    writeFileSync(join(dataDir, 'envs', 'env_a', 'spec.json'), spec(tags.spec));
    writeFileSync(join(dataDir, 'envs', 'env_a', 'versions', 'snap_1.json'), spec(tags.version));
    execFileSync('docker', ['create', '--name', container, tags.container, 'true'], { stdio: 'ignore' });
  });
  after(() => {
    try {
      execFileSync('docker', ['rm', '-f', container], { stdio: 'ignore' });
    } catch {}
    for (const t of Object.values(tags)) {
      try {
        execFileSync('docker', ['image', 'rm', '-f', t], { stdio: 'ignore' });
      } catch {}
    }
    rmSync(root, { recursive: true, force: true });
  });

  it('removes only what nothing uses, past the age bound; a held image goes once released', async () => {
    const release = await builds.hold([tags.held]);
    const young = await builds.collect(docker, dataDir, 3600_000);
    assert.deepEqual(young.removed, [], 'every image is younger than an hour');
    for (const n of NAMES) assert.ok(await exists(tags[n]), n);

    const swept = await builds.collect(docker, dataDir, 0);
    assert.deepEqual(swept.removed, [tags.unused]);
    assert.equal(await exists(tags.unused), false);
    for (const n of NAMES.filter((x) => x !== 'unused')) assert.ok(await exists(tags[n]), `${n} is kept`);

    release();
    execFileSync('docker', ['rm', '-f', container], { stdio: 'ignore' });
    rmSync(join(dataDir, 'envs', 'env_a', 'spec.json'));
    const after = await builds.collect(docker, dataDir, 0);
    assert.deepEqual(after.removed.sort(), [tags.held, tags.container, tags.spec].sort());
    assert.ok(await exists(tags.version), 'a version the environment can roll back to keeps its image');
    assert.ok(await exists(tags.other), "another sidecar's build is never touched");
  });
});
