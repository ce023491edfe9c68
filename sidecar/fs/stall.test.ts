// A transfer that stops moving bytes is abandoned after its idle bound, with a clear error and an
// aborted request signal; one that keeps moving is never cut, however long it takes in all. The
// test process goes on after the bound (a throw in the watch's timer would have ended it).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { stallWatch } from './stall.ts';

test('a stalled transfer is abandoned after the idle bound, and the process goes on', async () => {
  const watch = stallWatch('sending a file', 50);
  const source = new PassThrough();
  const sink = new PassThrough();
  sink.resume();
  const done = pipeline(source, watch.stream, sink);
  source.write('first bytes');
  await assert.rejects(done, /sending a file: no byte moved for 0 s; abandoned/);
  assert.equal(watch.signal.aborted, true);
  assert.match(String(watch.signal.reason), /no byte moved/);
  await sleep(100);
  assert.equal(process.exitCode ?? 0, 0);
});

test('a request that never starts is abandoned too', async () => {
  const watch = stallWatch('fetching a file', 30);
  await once(watch.signal, 'abort');
  assert.equal(watch.stream.destroyed, true);
});

test('a transfer that keeps moving is never cut, and a finished one leaves no timer', async () => {
  const watch = stallWatch('sending a file', 60);
  const source = new PassThrough();
  let got = 0;
  const done = pipeline(source, watch.stream, async (chunks: AsyncIterable<Buffer>) => {
    for await (const c of chunks) got += c.length;
  });
  // Four times the idle bound in all, never more than a third of it between chunks.
  for (let i = 0; i < 12; i++) {
    source.write(Buffer.alloc(1000));
    await sleep(20);
  }
  source.end();
  await done;
  assert.equal(got, 12_000);
  await sleep(100);
  assert.equal(watch.signal.aborted, false);
});
