// guard() and Faults: a callback's throw or rejection is reported, logged with its stack and
// counted instead of escaping to the event loop; the process-level handlers count what no guard
// caught and ask to exit only where going on is unsafe.
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { watchAlive } from '../test/support/alive.ts';
import { Faults, guard } from './faults.ts';

test('a guarded timer callback, event handler and async callback that fail are logged and counted, not thrown', async () => {
  const lines: string[] = [];
  const faults = new Faults({ log: (l) => lines.push(l) });
  try {
    const alive = watchAlive();
    setTimeout(
      guard('test timer', () => {
        throw new Error('timer threw');
      }),
      0,
    );
    const emitter = new EventEmitter();
    emitter.on(
      'x',
      guard('test handler', () => {
        throw new Error('handler threw');
      }),
    );
    emitter.emit('x');
    setImmediate(
      guard('test async', async () => {
        throw new Error('async callback rejected');
      }),
    );
    // Every fault above falls due within the bound; nothing may reach the process.
    await alive.assertNothingEscapedAfter(5);
    assert.equal(faults.counts().get('callback'), 3);
    assert.match(lines.join('\n'), /callback \(1 so far\) in test handler: Error: handler threw\n\s+at /);
    assert.match(lines.join('\n'), /in test timer: Error: timer threw/);
    assert.match(lines.join('\n'), /in test async: Error: async callback rejected/);
  } finally {
    faults.close();
  }
});

test('process-level faults are counted; an internal assertion or a storm asks to exit, with the reason', () => {
  const events = new EventEmitter();
  const proc = events as unknown as NodeJS.Process;
  const exits: string[] = [];
  const faults = new Faults({ log: () => {}, stormLimit: 3 });
  try {
    const uninstall = faults.installProcessHandlers(proc, (reason) => exits.push(reason));
    events.emit('uncaughtException', new Error('one'));
    events.emit('unhandledRejection', new Error('two'));
    assert.deepEqual(exits, []);
    events.emit('uncaughtException', Object.assign(new Error('bad'), { code: 'ERR_INTERNAL_ASSERTION' }));
    assert.match(exits[0], /internal failure \(ERR_INTERNAL_ASSERTION\)/);
    events.emit('uncaughtException', new Error('four'));
    assert.match(exits[1], /4 uncaught errors within a minute/);
    assert.deepEqual(
      [faults.counts().get('uncaughtException'), faults.counts().get('unhandledRejection')],
      [3, 1],
    );
    uninstall();
    assert.equal(events.listenerCount('uncaughtException'), 0);
  } finally {
    faults.close();
  }
  const other = new Faults({
    log: () => {},
    unsafe: (f) => ((f.error as Error).message === 'disk gone' ? 'the disk is gone' : null),
  });
  assert.equal(
    other.record({ kind: 'uncaughtException', where: 'process', error: new Error('disk gone') }),
    'the disk is gone',
  );
  other.close();
});
