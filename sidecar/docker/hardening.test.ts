// Every service of a rendered stack on real Docker: `NoNewPrivs: 1` in each container,
// an init process as PID 1 that reaps orphans (zombies once used up the pid limit and blocked every
// exec), volumes mounted nosuid,nodev inside the container (the storage layer's mount), the disk
// limit enforced inside the container, and a log
// driver with max-size/max-file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { openStorage, type StorageBackend } from '../storage/index.ts';
import { unmountUnder } from '../storage/quota.ts';
import { LOG_MAX_FILES, LOG_MAX_SIZE } from './render.ts';
import { cleanupTestEnvs, svc, type TestEnv, testEnv, testEnvId } from './testing.ts';

describe('hardening of every service on real Docker', { skip: tier('docker') }, () => {
  let env: TestEnv;
  let storage: StorageBackend;
  let dataDir: string;
  before(async () => {
    await ensureTestImages();
    dataDir = mkdtempSync(join(tmpdir(), 'svc-harden-'));
    storage = await openStorage({ dataDir });
    // The volume is the storage layer's dataset, limited and mounted as svcd makes it.
    const envId = testEnvId('hard');
    const how = await storage.setQuota(envId, 64 * 1024 * 1024);
    assert.ok(!how.startsWith('none'), how);
    const paths = await storage.prepare(envId, ['data']);
    env = await testEnv(
      'hard',
      {
        services: [
          // PID 1 of the image's command never waits for children (like many real entrypoints).
          svc('app', BUSYBOX_IMAGE, {
            command: ['sleep', '100000'],
            volumes: ['data:/data'],
            resources: { memory_mb: 0, pids: 40, cpus: 0 },
          }),
          svc('db', BUSYBOX_IMAGE, { user: '1000:1000' }),
        ],
        volumes: ['data'],
        egress: 'allow',
      },
      'v2',
      { envId, volumePaths: paths },
    );
    await env.stack.up(120);
  });
  after(async () => {
    await cleanupTestEnvs();
    await storage.destroy(env.stack.envId).catch(() => {});
    await unmountUnder(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('NoNewPrivs is 1 and PID 1 is an init in every service', async () => {
    for (const service of ['app', 'db']) {
      const r = await env.stack.engine.exec(service, [
        'sh',
        '-c',
        'grep NoNewPrivs /proc/self/status; cat /proc/1/comm',
      ]);
      assert.equal(r.exit_code, 0, r.stderr);
      const [nnp, pid1] = r.stdout.trim().split('\n');
      assert.match(nnp, /^NoNewPrivs:\s+1$/, `${service}: ${nnp}`);
      assert.equal(pid1, 'docker-init', `${service}: PID 1 is ${pid1}`);
    }
  });

  test('orphans are reaped: 3 x 30 short-lived orphans under a pid limit of 40 never block exec', async () => {
    for (let batch = 0; batch < 3; batch++) {
      // Each ( … & ) leaves an orphan that is re-parented to PID 1 and exits at once.
      const r = await env.stack.engine.exec('app', [
        'sh',
        '-c',
        'set -e; i=0; while [ $i -lt 30 ]; do (sleep 0 &); i=$((i+1)); done; echo done',
      ]);
      assert.equal(r.exit_code, 0, `batch ${batch}: ${r.stderr}`);
      assert.equal(r.stdout.trim(), 'done');
    }
    const z = await env.stack.engine.exec('app', [
      'sh',
      '-c',
      'cat /proc/[0-9]*/stat 2>/dev/null | grep -c " Z " || true',
    ]);
    assert.ok(Number(z.stdout.trim()) < 5, `zombies left: ${z.stdout}`);
  });

  test('volumes are mounted nosuid,nodev inside the container', async () => {
    const r = await env.stack.engine.exec('app', ['sh', '-c', 'grep " /data " /proc/mounts']);
    assert.equal(r.exit_code, 0, r.stderr);
    const opts = r.stdout.trim().split(' ')[3].split(',');
    assert.ok(opts.includes('nosuid') && opts.includes('nodev'), r.stdout);
  });

  test('a write past the disk limit fails inside the container with ENOSPC; the host keeps its space', async () => {
    const r = await env.stack.engine.exec('app', [
      'sh',
      '-c',
      'dd if=/dev/zero of=/data/big bs=1M count=256 2>&1; echo rc=$?',
    ]);
    assert.match(r.stdout, /No space left on device|Disk quota exceeded/, r.stdout);
    assert.doesNotMatch(r.stdout, /rc=0/);
    const size = await env.stack.engine.exec('app', ['sh', '-c', 'du -m /data/big | cut -f1']);
    assert.ok(Number(size.stdout.trim()) <= 64, `wrote ${size.stdout.trim()} MiB under a 64 MiB limit`);
  });

  test('container logs are bounded (json-file with max-size and max-file)', async () => {
    for (const service of ['app', 'db']) {
      const info = await env.stack.engine.inspect(service);
      assert.equal(info.HostConfig.LogConfig?.Type, 'json-file');
      assert.deepEqual(info.HostConfig.LogConfig?.Config, {
        'max-size': LOG_MAX_SIZE,
        'max-file': String(LOG_MAX_FILES),
      });
    }
  });
});
