// A warm-pool claim's thaw: env.pause remembers the containers it froze, so env.unpause unpauses
// them by id without listing the project first. Whenever that record may be stale (a container
// removed or replaced, or running again), the thaw goes the listed way and still thaws every
// paused container of the stack. An engine in memory counts the calls; the handlers' path on real
// Docker is sidecar/handlers/spare-exec.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type Docker from 'dockerode';
import { DockerEngine, EngineState, PROJECT_LABEL, SERVICE_LABEL, type ServiceContainer } from './engine.ts';

const PROJECT = 'svc_heldthaw';

/** Containers in memory: their states, and every list, pause and unpause call made. */
class FakeDocker {
  readonly state = new Map<string, 'running' | 'paused'>();
  readonly calls: string[] = [];
  constructor(ids: string[]) {
    for (const id of ids) this.state.set(id, 'running');
  }
  async listContainers() {
    this.calls.push('list');
    return [...this.state].map(([id, state]) => ({
      Id: id,
      State: state,
      Image: 'busybox',
      ImageID: 'sha256:x',
      Labels: { [PROJECT_LABEL]: PROJECT, [SERVICE_LABEL]: id.replace('c-', '') },
    }));
  }
  getContainer(id: string) {
    return {
      pause: async () => {
        this.calls.push(`pause ${id}`);
        this.state.set(id, 'paused');
      },
      unpause: async () => {
        this.calls.push(`unpause ${id}`);
        const s = this.state.get(id);
        if (!s) throw Object.assign(new Error(`no such container: ${id}`), { statusCode: 404 });
        if (s !== 'paused') throw Object.assign(new Error(`${id} is not paused`), { statusCode: 500 });
        this.state.set(id, 'running');
      },
    };
  }
}

async function pausedStack() {
  const fake = new FakeDocker(['c-main', 'c-db', 'c-cache']);
  const state = new EngineState();
  const engine = new DockerEngine(PROJECT, fake as unknown as Docker, state);
  const running: ServiceContainer[] = (await engine.containers()).filter((c) => c.state === 'running');
  await engine.pauseHeld(running);
  fake.calls.length = 0;
  state.lastSeen.clear();
  return { fake, engine, state };
}

describe('thawing what env.pause froze', () => {
  test('unpauses the containers it paused by id, without a listing, and primes the exec hints', async () => {
    const { fake, engine, state } = await pausedStack();
    assert.equal(engine.holdsPaused(), true);
    assert.deepEqual((await engine.unpause()).sort(), ['cache', 'db', 'main']);
    assert.equal(engine.holdsPaused(), false);
    assert.deepEqual(fake.calls.sort(), ['unpause c-cache', 'unpause c-db', 'unpause c-main']);
    assert.equal(state.lastSeen.get(`${PROJECT}/main`), 'c-main');
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
    for (const id of fake.state.keys()) assert.equal(engine.spares.isFrozen(id), false);
  });

  test('a second env.pause (nothing left running) keeps the record: the thaw still thaws all', async () => {
    const { fake, engine } = await pausedStack();
    await engine.pauseHeld((await engine.containers()).filter((c) => c.state === 'running'));
    fake.calls.length = 0;
    assert.deepEqual((await engine.unpause()).sort(), ['cache', 'db', 'main']);
    assert.ok(!fake.calls.includes('list'));
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
  });

  test('the record is used once: a second thaw lists the stack and finds nothing paused', async () => {
    const { fake, engine } = await pausedStack();
    await engine.unpause();
    fake.calls.length = 0;
    assert.deepEqual(await engine.unpause(), []);
    assert.deepEqual(fake.calls, ['list']);
  });

  test('a container removed since the pause: the listing decides, and the rest is still thawed', async () => {
    const { fake, engine } = await pausedStack();
    fake.state.delete('c-db');
    fake.state.set('c-db2', 'paused'); // its replacement, paused as well
    assert.deepEqual((await engine.unpause()).sort(), ['cache', 'db2', 'main']);
    assert.ok(fake.calls.includes('list'), 'a stale record sends the thaw the listed way');
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
  });

  test('a thaw of named services goes the listed way and leaves the record for the whole thaw', async () => {
    const { fake, engine } = await pausedStack();
    assert.deepEqual(await engine.unpause(['db']), ['db']);
    assert.deepEqual(fake.calls, ['list', 'unpause c-db']);
    fake.calls.length = 0;
    // c-db runs again, so the record is stale for it: the thaw still ends with all running.
    assert.deepEqual((await engine.unpause()).sort(), ['cache', 'main']);
    assert.deepEqual([...fake.state.values()], ['running', 'running', 'running']);
  });
});
