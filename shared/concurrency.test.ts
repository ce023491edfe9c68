import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { test } from 'node:test';
import {
  AGAIN,
  backoff,
  bounded,
  deadline,
  KeyedQueue,
  Limiter,
  QUEUE_WAIT_CHANNEL,
  retry,
  retryFailures,
  settledWithin,
  sleep,
  untilAborted,
  withTimeout,
} from './concurrency.ts';

const gate = () => {
  let open!: () => void;
  const p = new Promise<void>((r) => {
    open = r;
  });
  return { p, open };
};

test('a keyed queue runs one task at a time per key, in order, and a failure does not stop the next', async () => {
  const q = new KeyedQueue();
  const log: string[] = [];
  const first = gate();
  const a = q.run('k', async () => {
    log.push('a start');
    await first.p;
    log.push('a end');
    throw new Error('a failed');
  });
  const b = q.run('k', async () => {
    log.push('b');
    return 2;
  });
  const other = q.run('other', async () => {
    log.push('other');
    return 3;
  });
  assert.equal(await other, 3);
  assert.deepEqual(log, ['a start', 'other']);
  first.open();
  await assert.rejects(a, /a failed/);
  assert.equal(await b, 2);
  assert.deepEqual(log, ['a start', 'other', 'a end', 'b']);
  assert.equal(q.size, 0);
});

test('an empty key is not queued', async () => {
  const q = new KeyedQueue();
  const hold = gate();
  const log: string[] = [];
  const a = q.run('', async () => {
    await hold.p;
    log.push('a');
  });
  await q.run('', async () => {
    log.push('b');
  });
  hold.open();
  await a;
  assert.deepEqual(log, ['b', 'a']);
});

test('a queued task whose signal aborts gives up its turn; the next still waits for the running one', async () => {
  const q = new KeyedQueue();
  const hold = gate();
  const log: string[] = [];
  const a = q.run('k', async () => {
    await hold.p;
    log.push('a');
  });
  const ac = new AbortController();
  const b = q.run('k', async () => log.push('b never'), ac.signal);
  const c = q.run('k', async () => log.push('c'));
  ac.abort(new Error('gave up'));
  await assert.rejects(b, /gave up/);
  assert.deepEqual(log, []);
  hold.open();
  await Promise.all([a, c]);
  assert.deepEqual(log, ['a', 'c']);
});

test('a task that has to wait for an earlier one of its key says so on the queue-wait channel', async () => {
  const waits: string[] = [];
  const on = (m: unknown) => waits.push((m as { key: string }).key);
  subscribe(QUEUE_WAIT_CHANNEL, on);
  try {
    const q = new KeyedQueue();
    const hold = gate();
    const a = q.run('k', () => hold.p);
    const free = q.run('', async () => {});
    const other = q.run('other', async () => {});
    assert.deepEqual(waits, [], 'a task with nothing before it does not wait');
    const b = q.run('k', async () => {});
    assert.deepEqual(waits, ['k']);
    hold.open();
    await Promise.all([a, b, free, other]);
  } finally {
    unsubscribe(QUEUE_WAIT_CHANNEL, on);
  }
});

test('a limiter runs that many tasks at once, the rest in order as slots free, and says who waits', async () => {
  const waits: string[] = [];
  const on = (m: unknown) => waits.push((m as { key: string }).key);
  subscribe(QUEUE_WAIT_CHANNEL, on);
  const turn = () => new Promise((r) => setImmediate(r)); // every promise settled that can be
  try {
    const l = new Limiter(2, 'lim');
    const log: string[] = [];
    const holds = [gate(), gate(), gate()];
    const task = (name: string, i: number, fail = false) =>
      l.run(async () => {
        log.push(name);
        await holds[i].p;
        if (fail) throw new Error(`${name} failed`);
      });
    const a = task('a', 0);
    const b = task('b', 1, true);
    const c = task('c', 2);
    const d = l.run(async () => log.push('d'));
    await turn();
    assert.deepEqual(log, ['a', 'b']);
    assert.deepEqual(waits, ['lim', 'lim']);
    holds[1].open();
    await assert.rejects(b, /b failed/);
    await turn();
    assert.deepEqual(log, ['a', 'b', 'c'], 'a failed task frees its slot for the next in line');
    holds[0].open();
    await Promise.all([a, d]);
    assert.deepEqual(log, ['a', 'b', 'c', 'd']);
    holds[2].open();
    await c;
    await l.run(async () => log.push('e'));
    assert.equal(waits.length, 2, 'with slots free again nothing waits');
  } finally {
    unsubscribe(QUEUE_WAIT_CHANNEL, on);
  }
});

test('untilAborted and deadline: the timeout reason, the parent reason mapped, and a clear that disarms', async () => {
  const never = new Promise<never>(() => {});
  const d = deadline(1, () => new Error('timed out'));
  await assert.rejects(untilAborted(never, d.signal), /timed out/);
  const parent = new AbortController();
  const p = deadline(
    60_000,
    () => new Error('no'),
    parent.signal,
    (r) => new Error(`cancelled: ${String(r)}`),
  );
  parent.abort('stop');
  await assert.rejects(untilAborted(never, p.signal), /cancelled: stop/);
  p.clear();
  const cleared = deadline(1, () => new Error('fired'));
  cleared.clear();
  // Timers of one length fire in the order they were set: once this one has, the cleared one would have.
  await sleep(1);
  assert.equal(cleared.signal.aborted, false);
  assert.equal(await untilAborted(Promise.resolve(7), new AbortController().signal), 7);
});

test('bounded: the outcome, its own failure, the timeout reason, and the signal reason mapped', async () => {
  const never = new Promise<string>(() => {});
  assert.equal(await bounded(Promise.resolve('ok'), 60_000, () => new Error('x')), 'ok');
  await assert.rejects(
    bounded(Promise.reject(new Error('own')), 60_000, () => new Error('x')),
    /own/,
  );
  await assert.rejects(
    bounded(never, 1, () => new Error('too slow')),
    /too slow/,
  );
  const ac = new AbortController();
  const waiting = bounded(
    never,
    60_000,
    () => new Error('x'),
    ac.signal,
    (r) => new Error(`mapped ${r}`),
  );
  ac.abort('stop');
  await assert.rejects(waiting, /mapped stop/);
  await assert.rejects(
    bounded(
      Promise.resolve('late'),
      60_000,
      () => new Error('x'),
      ac.signal,
      () => new Error('already'),
    ),
    /already/,
  );
  // Settled first: a later abort changes nothing.
  const ac2 = new AbortController();
  const done = bounded(Promise.resolve(7), 60_000, () => new Error('x'), ac2.signal);
  assert.equal(await done, 7);
  ac2.abort('after');
});

test('withTimeout passes the outcome through or fails with its own error; settledWithin says which', async () => {
  assert.equal(await withTimeout(Promise.resolve('ok'), 60_000, () => new Error('x')), 'ok');
  await assert.rejects(
    withTimeout(Promise.reject(new Error('own')), 60_000, () => new Error('x')),
    /own/,
  );
  await assert.rejects(
    withTimeout(new Promise(() => {}), 1, () => new Error('too slow')),
    /too slow/,
  );
  assert.equal(await settledWithin(Promise.reject(new Error('ignored')), 60_000), true);
  assert.equal(await settledWithin(new Promise(() => {}), 1), false);
});

test('sleep ends early when its signal aborts', async () => {
  const ac = new AbortController();
  const s = sleep(60_000, ac.signal);
  ac.abort();
  await s;
});

test('backoff doubles from the base, only adds jitter, and never passes the cap', () => {
  const o = { baseMs: 1000, capMs: 30_000, jitter: 0.25 };
  for (let i = 0; i < 200; i++) {
    const attempt = i % 12;
    const v = backoff(attempt, o);
    const base = Math.min(30_000, 1000 * 2 ** attempt);
    assert.ok(v >= base && v <= Math.min(30_000, base * 1.25), `${attempt}: ${v}`);
  }
  assert.deepEqual(
    [0, 1, 2, 5, 40].map((n) => backoff(n, { baseMs: 100, capMs: 1000 })),
    [100, 200, 400, 1000, 1000],
  );
});

test('retry calls again after AGAIN, returns the first value, and stops on a throw or an abort', async () => {
  const seen: number[] = [];
  const v = await retry(
    async (n) => {
      seen.push(n);
      return n < 2 ? AGAIN : 'done';
    },
    { delayMs: 0 },
  );
  assert.equal(v, 'done');
  assert.deepEqual(seen, [0, 1, 2]);
  await assert.rejects(
    retry(
      async (n) => {
        if (n === 1) throw new Error('final');
        return AGAIN;
      },
      { delayMs: (n) => n },
    ),
    /final/,
  );
  const ac = new AbortController();
  const r = retry(async () => AGAIN, { delayMs: 60_000, signal: ac.signal });
  ac.abort(new Error('stopped'));
  await assert.rejects(r, /stopped/);
});

test('retryFailures tries again while `when` passes, at most `attempts` times, and throws the rest at once', async () => {
  const seen: number[] = [];
  const v = await retryFailures(
    async (n) => {
      seen.push(n);
      if (n < 2) throw new Error('busy');
      return 'done';
    },
    { attempts: 3, when: (err) => err.message === 'busy', backoff: { baseMs: 1, capMs: 2, jitter: 0.5 } },
  );
  assert.equal(v, 'done');
  assert.deepEqual(seen, [0, 1, 2]);
  let tries = 0;
  await assert.rejects(
    retryFailures(
      async () => {
        tries++;
        throw new Error('busy');
      },
      { attempts: 4, when: () => true },
    ),
    /busy/,
  );
  assert.equal(tries, 4, 'the bound holds');
  tries = 0;
  await assert.rejects(
    retryFailures(
      async () => {
        tries++;
        throw new Error('final');
      },
      { attempts: 4, when: async (err) => err.message === 'busy' },
    ),
    /final/,
  );
  assert.equal(tries, 1, 'a failure `when` refuses is not tried again');
});
