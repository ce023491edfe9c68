// A freeze the kernel cannot complete in time (a process in uninterruptible I/O: the runtime says
// "OCI runtime pause failed: unable to freeze" and thaws the container) must not fail a verify or a
// snapshot at the first try: the pause is tried again, with a bound, and on giving up everything
// the attempt froze runs again. Pause failures are injected (an engine whose first N pauses fail);
// the rest is real: the fake engine for the rule itself, real Docker for verify.collect and
// env.snapshot through their handlers.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type Docker from 'dockerode';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { sleep } from '../../shared/concurrency.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { type SidecarContext, saveSpec, stackOf } from '../context.ts';
import { commandRunner, testContext } from '../handlers/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { DockerEngine, dockerClient, EngineState, type ServiceContainer } from './engine.ts';
import { projectName } from './render.ts';
import { svc, testEnvId } from './testing.ts';

/** The engine's answer when the runtime could not freeze a container. */
function freezeError(id: string): Error {
  return Object.assign(
    new Error(
      `(HTTP code 500) server error - Cannot pause container ${id}: OCI runtime pause failed: unable to freeze: unknown`,
    ),
    { statusCode: 500 },
  );
}

/** Which pauses fail: `left` more of the containers `failing(id)` names (Infinity: every one). */
interface Faults {
  failing: (id: string) => boolean;
  left: number;
}

/** `docker` whose container pauses fail while `faults` says so; every other call is the real one. */
function withPauseFaults(docker: Docker, faults: Faults): Docker {
  return new Proxy(docker, {
    get(target, prop) {
      if (prop === 'getContainer')
        return (id: string) => {
          const c = target.getContainer(id);
          const pause = c.pause.bind(c);
          return Object.assign(c, {
            pause: () => {
              if (!faults.failing(id) || faults.left <= 0) return pause();
              faults.left--;
              return Promise.reject(freezeError(id));
            },
          });
        };
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** An engine of containers in memory: what each pause and unpause call did. */
class FakeDocker {
  readonly state = new Map<string, 'running' | 'paused'>();
  readonly pauses: string[] = [];
  readonly fails: (id: string, nth: number) => number | null;
  constructor(ids: string[], fails: (id: string, nth: number) => number | null) {
    this.fails = fails;
    for (const id of ids) this.state.set(id, 'running');
  }
  getContainer(id: string) {
    return {
      pause: async () => {
        const nth = this.pauses.filter((x) => x === id).length;
        this.pauses.push(id);
        const code = this.fails(id, nth);
        if (code === 500) throw freezeError(id);
        if (code) throw Object.assign(new Error(`(HTTP code ${code}) refused - no`), { statusCode: code });
        this.state.set(id, 'paused');
      },
      unpause: async () => {
        if (this.state.get(id) !== 'paused')
          throw Object.assign(new Error('not paused'), { statusCode: 500 });
        this.state.set(id, 'running');
      },
    };
  }
}

const RETRY = { attempts: 4, backoff: { baseMs: 1, capMs: 5 } };
const containers = (ids: string[]): ServiceContainer[] =>
  ids.map((id) => ({ id, service: id.replace('c-', ''), state: 'running', image: '', imageId: '' }));

function fakeEngine(fails: (id: string, nth: number) => number | null) {
  const ids = ['c-agent', 'c-sibling', 'c-db'];
  const fake = new FakeDocker(ids, fails);
  const engine = new DockerEngine('svc_fake', fake as unknown as Docker, new EngineState(), RETRY);
  return { fake, engine, todo: containers(ids) };
}

describe('pausing a stack: the rule', () => {
  test('a pause the runtime could not complete is tried again, and the others stay frozen meanwhile', async () => {
    const { fake, engine, todo } = fakeEngine((id, nth) => (id === 'c-sibling' && nth < 2 ? 500 : null));
    await engine.freezeEach('pause', todo);
    assert.deepEqual([...fake.state.values()], ['paused', 'paused', 'paused']);
    assert.deepEqual(
      fake.pauses.filter((x) => x === 'c-sibling').length,
      3,
      'two failed tries and the one that froze it',
    );
    assert.deepEqual(fake.pauses.filter((x) => x === 'c-agent').length, 1, 'what froze is not paused again');
    await engine.freezeEach('unpause', todo);
  });

  test('after the last attempt every container this pause froze runs again, and the error says why', async () => {
    const { fake, engine, todo } = fakeEngine((id) => (id === 'c-sibling' ? 500 : null));
    await assert.rejects(
      engine.freezeEach('pause', todo),
      /^DockerError: pause service 'sibling': .*unable to freeze: unknown \(4 attempts\)$/,
    );
    assert.equal(fake.pauses.filter((x) => x === 'c-sibling').length, RETRY.attempts);
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
    for (const c of todo)
      assert.equal(engine.spares.isFrozen(c.id), false, `${c.service} is not held frozen`);
  });

  test('a refusal no retry can change (gone, already paused) ends the pause at once, thawing the rest', async () => {
    const { fake, engine, todo } = fakeEngine((id) => (id === 'c-db' ? 409 : null));
    await assert.rejects(engine.freezeEach('pause', todo), /^DockerError: pause service 'db': no$/);
    assert.equal(fake.pauses.length, 3, 'no second try');
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
  });
});

describe('verify.collect and env.snapshot when a freeze fails, on real Docker', {
  skip: tier('docker'),
}, () => {
  const envId = testEnvId('pz');
  const faults: Faults = { failing: () => false, left: 0 };
  let dir: string;
  let ctx: SidecarContext;
  let run: ReturnType<typeof commandRunner>;
  let engine: DockerEngine;

  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-pause-'));
    ctx = { ...(await testContext(join(dir, 'data'))), docker: withPauseFaults(dockerClient(), faults) };
    run = commandRunner(ctx, envId, 'pz');
    const services: ServiceRecord[] = [
      svc('agent', BUSYBOX_IMAGE, {
        volumes: ['work:/work'],
        command: ['sh', '-c', 'echo done > /work/answer; trap "exit 0" TERM; while :; do sleep 1; done'],
      }),
      svc('sibling', BUSYBOX_IMAGE),
    ];
    const spec = { services, volumes: ['work'], egress: 'allow' as const };
    const paths = await ctx.storage.prepare(envId, spec.volumes);
    await saveSpec(ctx, envId, spec);
    await stackOf(ctx, envId, spec, paths).up(120);
    engine = new DockerEngine(projectName(envId), dockerClient(), ctx.engineState);
    const sibling = (await engine.find('sibling')).id;
    faults.failing = (id) => id === sibling;
  });
  after(async () => {
    faults.left = 0;
    await run('env.destroy', {}).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  /** Service → state, once Docker's report settles on `want` (20.10 reports pause and resume late). */
  const states = async (want: Record<string, string>) => {
    const now = async () => Object.fromEntries((await engine.containers()).map((c) => [c.service, c.state]));
    for (let i = 0; i < 500 && JSON.stringify(await now()) !== JSON.stringify(want); i++) await sleep(20);
    return now();
  };
  const collect = (id: string) => run('verify.collect', { id, agent_service: 'agent', collect: ['/work'] });

  test('collect: the sibling freezes at its third try; the copy is made, the agent stays frozen', async () => {
    faults.left = 2;
    const r = await collect('dep_pz1');
    try {
      assert.equal(r.ok, true, r.error);
      assert.equal(faults.left, 0, 'both injected failures were met');
      assert.equal((r.payload as { files: number }).files, 1);
      assert.deepEqual(await states({ agent: 'paused', sibling: 'running' }), {
        agent: 'paused',
        sibling: 'running',
      });
    } finally {
      await states({ agent: 'paused', sibling: 'running' });
      await engine.unpause(['agent']);
    }
  });

  test('collect: a sibling that never freezes fails the collect, and nothing is left paused', async () => {
    faults.left = Number.POSITIVE_INFINITY;
    const r = await collect('dep_pz2');
    faults.left = 0;
    assert.equal(r.ok, false);
    assert.match(r.error ?? '', /pause service 'sibling': .*unable to freeze: unknown \(8 attempts\)/);
    assert.deepEqual(await states({ agent: 'running', sibling: 'running' }), {
      agent: 'running',
      sibling: 'running',
    });
  });

  test('snapshot: retried through a failed freeze; after a freeze that never completes, all run again', async () => {
    faults.left = 1;
    const ok = await run('env.snapshot', { name: 'ver_pz1' });
    assert.equal(ok.ok, true, ok.error);
    assert.equal(faults.left, 0);
    faults.left = Number.POSITIVE_INFINITY;
    const failed = await run('env.snapshot', { name: 'ver_pz2' });
    faults.left = 0;
    assert.equal(failed.ok, false);
    assert.match(failed.error ?? '', /pause service 'sibling': .*unable to freeze: unknown/);
    assert.deepEqual(await states({ agent: 'running', sibling: 'running' }), {
      agent: 'running',
      sibling: 'running',
    });
  });
});
