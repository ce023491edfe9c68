// Active health on a real engine: the sidecar starts dependants the moment their dependencies'
// own checks pass (not at Docker's next `interval`), in order, and a failing check still fails.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KEEPER } from '../../protocol/keeper.ts';
import { BUSYBOX_IMAGE, ensureTestImages, PGREDIS_IMAGE } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { durationMs, exitFailure, oneShots, probeCommand, startActive } from './active-health.ts';
import { StackUnhealthy } from './errors.ts';
import { cleanupTestEnvs, IDLE, svc, testEnv } from './testing.ts';

const skip = tier('docker');
// Docker's own first check would come only after a minute: anything healthy sooner was ours.
const SLOW = { interval: '60s', retries: 3 };

describe('active health: units', () => {
  it('reads compose durations', () => {
    assert.equal(durationMs('1m30s'), 90_000);
    assert.equal(durationMs('500ms'), 500);
    assert.equal(durationMs('2h'), 7_200_000);
    assert.equal(durationMs(''), 0);
    assert.throws(() => durationMs('5 seconds'), /not a duration/);
  });
  it('runs the test Docker would run', () => {
    assert.deepEqual(probeCommand({ test: ['CMD', 'redis-cli', 'ping'], interval: '', retries: 0 }), [
      'redis-cli',
      'ping',
    ]);
    assert.deepEqual(probeCommand({ test: ['CMD-SHELL', 'pg_isready -U app'], interval: '', retries: 0 }), [
      '/bin/sh',
      '-c',
      'pg_isready -U app',
    ]);
    assert.equal(probeCommand({ test: ['NONE'], interval: '', retries: 0 }), null);
    assert.equal(probeCommand(null), null);
  });
  it('an exit 0 completes a service only when the stack has a dependant waiting for exactly that', () => {
    const stack = [
      svc('main', BUSYBOX_IMAGE, {
        depends_on: {
          owner: { condition: 'service_completed_successfully' },
          db: { condition: 'service_healthy' },
        },
      }),
      svc('owner', BUSYBOX_IMAGE),
      svc('db', BUSYBOX_IMAGE),
    ];
    const completes = oneShots(stack);
    assert.deepEqual([...completes], ['owner']);
    const exited = (code: number, oom = false) => ({ ExitCode: code, OOMKilled: oom, Error: '' });
    assert.equal(exitFailure('owner', exited(0), completes), null);
    assert.equal(exitFailure('owner', exited(1), completes), 'exited with code 1');
    assert.equal(exitFailure('db', exited(0), completes), 'exited with code 0');
    assert.equal(
      exitFailure('owner', exited(137, true), completes),
      'exited with code 137 (killed: out of memory)',
    );
    // Without its dependant (the services one wait is about, not the stack) it is no one-shot.
    assert.equal(exitFailure('owner', exited(0), oneShots(stack.slice(1))), 'exited with code 0');
  });
});

describe('active health on a real engine', { skip }, () => {
  before(() => ensureTestImages({ postgres: true }));
  after(cleanupTestEnvs);

  it('starts each dependant only after its dependency is healthy, long before Docker would say so', async () => {
    const env = await testEnv('ah', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('c', BUSYBOX_IMAGE, {
          depends_on: { b: { condition: 'service_healthy' } },
          health: { test: ['CMD', 'true'], ...SLOW },
        }),
        svc('b', BUSYBOX_IMAGE, {
          depends_on: {
            a: { condition: 'service_healthy' },
            init: { condition: 'service_completed_successfully' },
          },
          health: { test: ['CMD-SHELL', 'test -f /tmp/up'], ...SLOW },
          command: ['sh', '-c', `sleep 1; touch /tmp/up; ${IDLE}`],
        }),
        svc('a', BUSYBOX_IMAGE, {
          health: { test: ['CMD-SHELL', 'test -f /tmp/up'], ...SLOW },
          command: ['sh', '-c', `sleep 1; touch /tmp/up; ${IDLE}`],
        }),
        svc('init', BUSYBOX_IMAGE, { command: ['sh', '-c', 'sleep 1; exit 0'] }),
      ],
    });
    const order: string[] = [];
    await env.stack.up(120, undefined, (s) => order.push(s));
    assert.ok(order.indexOf('a') < order.indexOf('b'), `a before b: ${order}`);
    assert.ok(order.indexOf('init') < order.indexOf('b'), `init before b: ${order}`);
    assert.equal(order.at(-1), 'c', `c last: ${order}`);
    assert.deepEqual([...order].sort(), ['a', 'b', 'c', 'init']);
    // b only started once a's file existed, so its own file is there now too.
    const b = await env.stack.engine.exec('b', ['test', '-f', '/tmp/up']);
    assert.equal(b.exit_code, 0);
    // Docker's own healthcheck is still there (status) and has not run yet: the wait was ours.
    const info = await env.stack.engine.inspect('a');
    assert.equal(info.State.Health?.Status, 'starting');
  });

  it('a failing check still fails the start, names the service, and its dependant never starts', async () => {
    const env = await testEnv('ahf', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('broken', BUSYBOX_IMAGE, {
          health: { test: ['CMD-SHELL', 'echo not-yet; exit 1'], interval: '1s', retries: 2 },
        }),
        svc('app', BUSYBOX_IMAGE, { depends_on: { broken: { condition: 'service_healthy' } } }),
      ],
    });
    const order: string[] = [];
    await assert.rejects(
      env.stack.up(120, undefined, (s) => order.push(s)),
      (err: Error) =>
        err instanceof StackUnhealthy && /service 'broken'/.test(err.message) && /not-yet/.test(err.message),
    );
    assert.deepEqual(order, ['broken']);
  });

  it('a start period lets checks fail before they count', async () => {
    const env = await testEnv('ahs', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('slow', BUSYBOX_IMAGE, {
          // Fails for 2 s, longer than interval × retries (1 s), but within the start period.
          health: {
            test: ['CMD-SHELL', 'test -f /tmp/up'],
            interval: '500ms',
            retries: 2,
            start_period: '30s',
          },
          command: ['sh', '-c', `sleep 2; touch /tmp/up; ${IDLE}`],
        }),
      ],
    });
    await env.stack.up(120);
    assert.equal((await env.stack.engine.exec('slow', ['test', '-f', '/tmp/up'])).exit_code, 0);
  });

  it('a container that exits fails the start with its exit code', async () => {
    const env = await testEnv('ahx', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('dies', BUSYBOX_IMAGE, {
          command: ['sh', '-c', 'echo bye; sleep 1; exit 3'],
          health: { test: ['CMD', 'false'], ...SLOW },
        }),
      ],
    });
    await assert.rejects(env.stack.up(120), /service 'dies' exited with code 3[\s\S]*bye/);
  });

  it('a deferred stay-up window: the start answers while it is open; an exit inside it rejects the watch', async () => {
    const env = await testEnv('ahd', {
      egress: 'allow',
      volumes: ['gate'],
      services: [
        svc('leaf', BUSYBOX_IMAGE, {
          volumes: ['gate:/w'],
          command: ['sh', '-c', 'until [ -f /w/go ]; do sleep 0.05; done; echo gone; exit 3'],
        }),
      ],
    });
    await env.stack.up(120);
    const [leaf] = await env.stack.engine.containers();
    await env.stack.engine.docker.getContainer(leaf.id).stop({ t: 0 });
    // A window far longer than the test: only an exit can end it.
    const { stayUp } = await startActive(env.stack.engine, env.stack.spec.services, {
      timeoutMs: 120_000,
      deferStayUp: true,
      stayUpMs: 600_000,
    });
    assert.ok(stayUp, 'answered inside the window');
    assert.equal((await env.stack.engine.inspect('leaf')).State.Running, true);
    writeFileSync(join(env.paths.gate, 'go'), '');
    await assert.rejects(stayUp, /service 'leaf' exited with code 3[\s\S]*gone/);
  });

  it("svc's keeper is proven steady as it starts: no stay-up window is left open for it", async () => {
    const env = await testEnv('ahk', {
      egress: 'allow',
      volumes: [],
      services: [
        svc('keeper', BUSYBOX_IMAGE, { command: [...KEEPER] }),
        // An image entrypoint that execs its arguments: the keeper is proven once it did.
        svc('wrapped', PGREDIS_IMAGE, { command: [...KEEPER] }),
        svc('idle', BUSYBOX_IMAGE),
      ],
    });
    await env.stack.up(120);
    for (const c of await env.stack.engine.containers())
      await env.stack.engine.docker.getContainer(c.id).stop({ t: 0 });
    const keeper = env.stack.spec.services.filter((s) => s.name !== 'idle');
    // A window far longer than the test: only the proof can end it.
    // Looks for up to ~10 s: a loaded machine may take its time to start the keeper's loop.
    const wide = { timeoutMs: 120_000, deferStayUp: true, stayUpMs: 600_000, keeperLooks: 2_000 };
    const alone = await startActive(env.stack.engine, keeper, wide);
    assert.equal(alone.stayUp, null, 'the keepers were proven, not left to their window');
    // Any other command without a check still has its window.
    const both = await startActive(env.stack.engine, env.stack.spec.services, wide);
    assert.ok(both.stayUp, 'the idle loop is left to its window');
    both.stayUp.catch(() => {});
  });
});
