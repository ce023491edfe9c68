// Health after a snapshot's thaw (spec env.snapshot: "unpauses ... and waits for health"): a
// service whose check passed just before the freeze and that is the same process since needs no
// new check; a service that restarted since, or whose check did not pass before, is checked again
// and still fails the wait. A one-shot (exited 0, a dependant waits for its completion) is complete
// in that wait even when its dependant is the service left paused.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { StackUnhealthy } from './errors.ts';
import { healthyBefore, waitHealthy } from './health.ts';
import { cleanupTestEnvs, IDLE, svc, type TestEnv, testEnv } from './testing.ts';

const skip = tier('docker');
// Docker's own checks would come only after a minute: every verdict here is the sidecar's.
const check = { test: ['CMD-SHELL', 'test -f /tmp/ok'], interval: '60s', retries: 3 };

describe('health after a freeze', { skip }, () => {
  let env: TestEnv;
  before(async () => {
    await ensureTestImages();
    env = await testEnv('hfz', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('app', BUSYBOX_IMAGE, {
          health: check,
          command: ['sh', '-c', `touch /tmp/ok; ${IDLE}`],
          depends_on: { init: { condition: 'service_completed_successfully' } },
        }),
        svc('plain', BUSYBOX_IMAGE),
        svc('init', BUSYBOX_IMAGE, { command: ['true'] }),
      ],
    });
    await env.stack.up(120);
  });
  after(cleanupTestEnvs);

  const services = () => env.stack.spec.services;
  const exec = (cmd: string) => env.stack.engine.exec('app', ['sh', '-c', cmd]);
  const freeze = async () => {
    assert.deepEqual((await env.stack.engine.pause()).sort(), ['app', 'plain']);
    assert.deepEqual((await env.stack.engine.unpause()).sort(), ['app', 'plain']);
  };

  it('lists every running service whose check passes now, and those without a check', async () => {
    const passed = await healthyBefore(env.stack.engine, services());
    const running = (await env.stack.engine.containers()).filter((c) => c.state === 'running');
    const ids = running.map((c) => c.id).sort();
    assert.deepEqual([...passed.keys()].sort(), ids);
    await exec('rm /tmp/ok');
    try {
      const now = await healthyBefore(env.stack.engine, services());
      const app = (await env.stack.engine.containers()).find((c) => c.service === 'app');
      assert.equal(now.has(app!.id), false, 'a failing check is not a pass');
    } finally {
      await exec('touch /tmp/ok');
    }
  });

  it('a service that passed just before the freeze is healthy after the thaw without a new check', async () => {
    const passed = await healthyBefore(env.stack.engine, services());
    await freeze();
    // Were it checked again now, it would fail: the wait took the pass from before the freeze.
    await exec('rm /tmp/ok');
    try {
      await waitHealthy(env.stack.engine, services(), 1500, { before: passed });
      await assert.rejects(waitHealthy(env.stack.engine, services(), 1500), StackUnhealthy);
    } finally {
      await exec('touch /tmp/ok');
    }
  });

  it('a service restarted since its pass is checked again, and its failing check fails the wait', async () => {
    const passed = await healthyBefore(env.stack.engine, services());
    const app = (await env.stack.engine.containers()).find((c) => c.service === 'app')!;
    await env.stack.engine.docker.getContainer(app.id).restart({ t: 0 });
    await exec('while [ ! -f /tmp/ok ]; do sleep 0.05; done; rm /tmp/ok'); // after its command's touch
    try {
      await assert.rejects(
        waitHealthy(env.stack.engine, services(), 1500, { before: passed }),
        (err: unknown) => {
          assert.ok(err instanceof StackUnhealthy);
          assert.match(err.message, /service 'app'/);
          return true;
        },
      );
    } finally {
      await exec('touch /tmp/ok');
    }
  });

  it('a one-shot whose dependant is left paused is complete, as it was at the start', async () => {
    assert.equal((await env.stack.engine.inspect('init')).State.ExitCode, 0);
    assert.deepEqual(await env.stack.engine.pause(['app']), ['app']);
    try {
      // The snapshot of a verify that keeps the agent frozen waits like this.
      await env.stack.waitHealthy(1500, { skip: ['app'] });
      // What makes it a one-shot is its dependant in the stack: an exit 0 of anything else fails.
      const alone = services().filter((s) => s.name !== 'app');
      await assert.rejects(waitHealthy(env.stack.engine, alone, 1500), /service 'init' exited with code 0/);
    } finally {
      await env.stack.engine.unpause(['app']);
    }
  });
});
