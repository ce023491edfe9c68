// The sidecar is killed with SIGKILL in the middle of env.create and started again: the
// deployment ends promptly with a clear error, and the restarted sidecar removes the half-made
// environment, so no container, network or volume is orphaned.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { finished, leftovers, type Real, startReal } from './real.ts';

// Healthy only after 60 s: env.create is still waiting on it when the sidecar is killed.
const SLOW = `
services:
  slow:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 60; touch /tmp/ready; while :; do sleep 1; done"]
    volumes: [data:/data]
    healthcheck:
      test: ["CMD", "test", "-f", "/tmp/ready"]
      interval: 1s
      retries: 100
volumes: {data: {}}
`;

describe('sidecar killed mid env.create', { skip: tier('docker') }, () => {
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
  });
  after(async () => r?.close());

  test('no orphaned containers after the restart; the deployment ends with a clear result', async () => {
    await r.t.req('POST', '/v1/projects', { body: { name: 'crash' } });
    const d = await r.t.req('POST', '/v1/projects/crash/deploy', { body: { compose: SLOW } });
    const envId = d.body.deployment.EnvID;
    const start = Date.now();
    while (leftovers(envId).filter((x) => x.startsWith('container')).length === 0) {
      assert.ok(Date.now() - start < 60_000, `no container appeared:\n${r.log()}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    await r.killSidecar();
    const killedAt = Date.now();
    const { deployment, phases } = await finished(r.t, d.body.deployment.ID);
    assert.ok(Date.now() - killedAt < 10_000, 'the deployment did not wait for the dead host');
    assert.equal(deployment.Status, 'failed');
    assert.equal(deployment.Error, 'prepare: env.create: host disconnected');
    assert.deepEqual(phases.at(-1).Evidence, { reverted: 'no previous version' });
    assert.equal((await r.t.req('GET', `/v1/envs/${envId}`)).body.environment.Status, 'failed');
    assert.notDeepEqual(
      leftovers(envId),
      [],
      'the kill left containers behind (what the restart must clean)',
    );
    await r.startSidecar();
    const cleaned = Date.now();
    while (leftovers(envId).length) {
      assert.ok(Date.now() - cleaned < 60_000, `left behind: ${leftovers(envId).join(', ')}\n${r.log()}`);
      await new Promise((res) => setTimeout(res, 250));
    }
    assert.match(r.log(), /finished commands a restart cut off: env\.create/);
    assert.equal(existsSync(join(r.dataDir, 'envs', envId)), false);
  });
});
