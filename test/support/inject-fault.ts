// Loaded into a program under test with `node --import test/support/inject-fault.ts …` and an IPC
// channel: each message makes the program throw where nothing of its own would catch it, the way
// a bug in a timer, an event handler or a forgotten promise would. The program's code holds no
// test hook for it. Messages: `timer`, `handler`, `rejection`, `internal` (an error carrying the
// code of Node's own internal assertions, after which a program must not go on).
import { EventEmitter } from 'node:events';

const faults: Record<string, () => void> = {
  timer: () =>
    setTimeout(() => {
      throw new Error('injected fault: a timer callback threw');
    }, 0),
  handler: () => {
    const emitter = new EventEmitter();
    emitter.on('tick', () => {
      throw new Error('injected fault: an event handler threw');
    });
    setImmediate(() => emitter.emit('tick'));
  },
  rejection: () => {
    void Promise.reject(new Error('injected fault: a promise nobody awaited rejected'));
  },
  internal: () =>
    setTimeout(() => {
      throw Object.assign(new Error('injected fault: an internal assertion failed'), {
        code: 'ERR_INTERNAL_ASSERTION',
      });
    }, 0),
};

process.on('message', (m) => {
  faults[String(m)]?.();
  process.send?.(`injected ${String(m)}`);
});
// The channel alone must not keep the program alive once it wants to stop.
process.channel?.unref();
