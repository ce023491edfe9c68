import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OutputRing } from './ring.ts';

const chunk = (seq: number, bytes: number) => ({
  seq,
  kind: 'stdout' as const,
  data: Buffer.alloc(bytes, 97),
});

test('the ring replays what it holds after since, and a gap for what it dropped', () => {
  const ring = new OutputRing(1000);
  for (let seq = 1; seq <= 3; seq++) ring.push(chunk(seq, 100));
  assert.deepEqual(
    ring.after(0).chunks.map((c) => c.seq),
    [1, 2, 3],
  );
  assert.equal(ring.after(0).gap, null);
  assert.deepEqual(
    ring.after(2).chunks.map((c) => c.seq),
    [3],
  );
  for (let seq = 4; seq <= 10; seq++) ring.push(chunk(seq, 300));
  const { gap, chunks } = ring.after(0);
  assert.deepEqual(gap, { from: 1, to: chunks[0].seq - 1 });
  assert.ok(ring.bytes <= 1000);
  // Past the drop, nothing is missing.
  assert.equal(ring.after(chunks[0].seq - 1).gap, null);
});

test('a million one-byte chunks hold no more memory than the bound', () => {
  const ring = new OutputRing(64 * 1024);
  for (let seq = 1; seq <= 1_000_000; seq++) ring.push(chunk(seq, 1));
  assert.ok(ring.bytes <= 64 * 1024);
  const { gap, chunks } = ring.after(0);
  assert.ok(chunks.length < 1100, `${chunks.length} chunks kept`);
  assert.equal(gap?.to, chunks[0].seq - 1);
  assert.equal(chunks.at(-1)?.seq, 1_000_000);
});

test('dropped chunks are let go at once: 100 MiB through a 1 MiB ring references about 1 MiB', () => {
  const max = 1024 * 1024;
  const ring = new OutputRing(max);
  // 64 KiB frames, as a flood arrives; compaction alone would keep up to 1,024 of them referenced.
  for (let seq = 1; seq <= 1600; seq++) ring.push(chunk(seq, 64 * 1024));
  assert.ok(ring.bytes <= max);
  assert.ok(ring.referencedBytes <= max, `${ring.referencedBytes} bytes still referenced`);
  assert.equal(ring.after(0).chunks.at(-1)?.seq, 1600);
});
