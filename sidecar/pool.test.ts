// The host's stack-operation pool: never more than `size` at once, waiting ones start
// in arrival order with teardowns first, each waiting one hears how many are ahead, and a failing
// operation frees its slot.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type Lane, StackPool, stackPoolFromEnv } from './pool.ts';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

/** Queues one operation that records its start and runs until its gate opens. */
function track(pool: StackPool, lane: Lane, name: string, log: string[], messages: string[] = []) {
  const g = gate();
  const done = pool.run(
    lane,
    async () => {
      log.push(name);
      await g.opened;
      return name;
    },
    (m) => messages.push(m),
  );
  return { ...g, done };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('stack pool', () => {
  it('runs at most `size` at once, 200 submitted together, and every one finishes', async () => {
    const pool = new StackPool(4);
    let now = 0;
    let peak = 0;
    const release: (() => void)[] = [];
    const all = Array.from({ length: 200 }, (_, i) =>
      pool.run(i % 3 ? 'setup' : 'teardown', async () => {
        now++;
        peak = Math.max(peak, now);
        await new Promise<void>((r) => release.push(r));
        now--;
        return i;
      }),
    );
    let finished = 0;
    for (const p of all) p.then(() => finished++);
    while (finished < 200) {
      await turn();
      assert.ok(now <= 4, `${now} running`);
      for (const r of release.splice(0)) r();
    }
    assert.equal((await Promise.all(all)).length, 200);
    assert.equal(peak, 4);
    assert.deepEqual(pool.stats(), { size: 4, running: 0, queued: { setup: 0, teardown: 0 } });
  });

  it('waiting setups start in arrival order; a waiting teardown goes before them', async () => {
    const pool = new StackPool(1);
    const log: string[] = [];
    const first = track(pool, 'setup', 's1', log);
    const s2 = track(pool, 'setup', 's2', log);
    const s3 = track(pool, 'setup', 's3', log);
    const t1 = track(pool, 'teardown', 't1', log);
    await turn();
    assert.deepEqual(log, ['s1']);
    assert.deepEqual(pool.stats().queued, { setup: 2, teardown: 1 });
    for (const op of [first, t1, s2, s3]) {
      op.open();
      await op.done;
    }
    assert.deepEqual(log, ['s1', 't1', 's2', 's3']);
  });

  it('a waiting operation is told how many are ahead of it, then when it started', async () => {
    const pool = new StackPool(2);
    const log: string[] = [];
    const running = [track(pool, 'setup', 'a', log), track(pool, 'setup', 'b', log)];
    const setupMsgs: string[] = [];
    const waiting = track(pool, 'setup', 'c', log, setupMsgs);
    const teardownMsgs: string[] = [];
    const teardown = track(pool, 'teardown', 'd', log, teardownMsgs);
    assert.deepEqual(setupMsgs, [
      'queued: 2 stack operations ahead on this host (2 running, at most 2 at once)',
    ]);
    assert.deepEqual(teardownMsgs, [
      'queued: 2 stack operations ahead on this host (2 running, at most 2 at once)',
    ]);
    for (const op of [...running, teardown, waiting]) op.open();
    await Promise.all([...running, teardown, waiting].map((o) => o.done));
    assert.match(setupMsgs[1], /^started after \d+ ms in the host's queue$/);
    const quiet: string[] = [];
    await pool.run(
      'setup',
      async () => {},
      (m) => quiet.push(m),
    );
    assert.deepEqual(quiet, [], 'a free slot starts at once, without a queue message');
  });

  it('a failing operation frees its slot for the next', async () => {
    const pool = new StackPool(1);
    const failing = pool.run('setup', async () => {
      throw new Error('compose failed');
    });
    const next = pool.run('setup', async () => 'ran');
    await assert.rejects(failing, /compose failed/);
    assert.equal(await next, 'ran');
    assert.equal(pool.stats().running, 0);
  });

  it('SVC_STACK_WORKERS sets the size; anything but a positive whole number is refused', () => {
    assert.equal(stackPoolFromEnv({ SVC_STACK_WORKERS: '6' }).size, 6);
    assert.ok(stackPoolFromEnv({}).size >= 2);
    for (const bad of ['0', '-1', '2.5', 'many', '99999'])
      assert.throws(() => stackPoolFromEnv({ SVC_STACK_WORKERS: bad }), /SVC_STACK_WORKERS/);
  });
});
