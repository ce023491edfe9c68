import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TaskRow } from '../docker/gvisor.ts';
import { GVISOR_DOCKER_RUNTIME } from '../docker/render.ts';
import { SandboxTasks } from './start.ts';

const info = { Id: 'c1', State: { Pid: 4242 }, HostConfig: { Runtime: GVISOR_DOCKER_RUNTIME } };
const row = (pid: number, cmd: string, ppid = 0): TaskRow => ({ pid, ppid, uid: 0, cmd });

/** A gVisor table that shows each of `views` in turn, then the last one for good. */
function tables(...views: TaskRow[][]) {
  let reads = 0;
  const processes = async () => views[Math.min(reads++, views.length - 1)];
  return { processes, paired: async () => 'not asked' as const, reads: () => reads };
}

test("a task that enters gVisor's table only after the engine reports the exec is still found", async () => {
  const base = [row(1, 'sleep')];
  // Before the start, then twice as runsc's proxy runs but the task is not in the sandbox yet.
  const t = tables(base, base, base, [...base, row(7, 'sh', 0), row(8, 'stty', 7)]);
  const got = await new SandboxTasks(t).start(
    info,
    ['svc-hupless'],
    async () => 'started',
    async () => 77,
    '/bin/sh',
  );
  assert.equal(got.value, 'started');
  assert.deepEqual(got.task, { sandboxPid: 4242, containerId: 'c1', task: 7, name: 'svc-hupless' });
  assert.equal(t.reads(), 4);
});

test('an exec that ends before its task is seen has none, and the look stops there', async () => {
  const base = [row(1, 'sleep')];
  const t = tables(base);
  let polls = 0;
  const got = await new SandboxTasks(t).start(
    info,
    ['true'],
    async () => 'started',
    async () => (++polls === 1 ? 77 : 0), // runs at first, then ended
  );
  assert.equal(got.task, null);
  assert.equal(t.reads(), 2);
});

test("new tasks that could be another exec's: the exec proxy's place tells which, else none", async () => {
  const views = [[row(1, 'sleep')], [row(1, 'sleep'), row(3, 'sh'), row(4, 'sh')]];
  const asked: [number, string[]][] = [];
  const paired = async (pid: number, cmd: string[]) => (asked.push([pid, cmd]), row(4, 'sh'));
  const one = await new SandboxTasks({ ...tables(...views), paired }).start(
    info,
    ['svc-hupless'],
    async () => 0,
    async () => 77,
    '/bin/sh',
  );
  assert.equal(one.task?.task, 4);
  assert.deepEqual(asked, [[77, ['/bin/sh', 'svc-hupless']]]);
  // Paired with a task that is not new, or not told at all: none.
  for (const answer of [row(1, 'sleep'), 'another exec started in the same clock tick']) {
    const t = { ...tables(...views), paired: async () => answer };
    const got = await new SandboxTasks(t).start(
      info,
      ['x'],
      async () => 0,
      async () => 77,
      '/bin/sh',
    );
    assert.equal(got.task, null);
  }
  // One new task, another exec's, while ours is not in the table yet: the pairing names ours.
  const late = {
    ...tables([row(1, 'sleep')], [row(1, 'sleep'), row(3, 'sh')]),
    paired: async () => row(5, 'sh'),
  };
  const lone = await new SandboxTasks(late).start(
    info,
    ['x'],
    async () => 0,
    async () => 77,
    '/bin/sh',
  );
  assert.equal(lone.task?.task, 5);
  const t = tables([], [row(3, 'cat'), row(4, 'cat')]);
  const got = await new SandboxTasks(t).start(
    info,
    ['cat'],
    async () => 0,
    async () => 77,
  );
  assert.equal(got.task, null);
});

test('a container not under gVisor starts without reading any table', async () => {
  const t = tables([]);
  const runc = { ...info, HostConfig: { Runtime: 'runc' } };
  const got = await new SandboxTasks(t).start(
    runc,
    ['cat'],
    async () => 1,
    async () => 77,
  );
  assert.deepEqual(got, { value: 1, task: null });
  assert.equal(t.reads(), 0);
});
