// The upload rewrite on archives no well-behaved tar tool writes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { extract, pack } from 'tar-stream';
import { rewriteUpload, UploadRefused } from './upload.ts';

async function tarOf(entries: { name: string; body: string }[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const ended = new Promise<void>((r) => p.on('end', () => r()));
  for (const e of entries) p.entry({ name: e.name, type: 'file', mode: 0o644 }, e.body);
  p.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/** Turns the 512-byte header at `offset` into `typeflag`, keeping its size field and data. */
function retype(tar: Buffer, offset: number, typeflag: string): void {
  tar.write(typeflag, offset + 156, 'latin1');
  tar.fill(' ', offset + 148, offset + 156);
  let sum = 0;
  for (let i = offset; i < offset + 512; i++) sum += tar[i];
  tar.write(`${sum.toString(8).padStart(6, '0')}\0 `, offset + 148, 'latin1');
}

async function namesIn(tar: Buffer): Promise<{ name: string; type: string; size: number }[]> {
  const ex = extract();
  const out: { name: string; type: string; size: number }[] = [];
  ex.on('entry', (h, stream, next) => {
    out.push({ name: h.name, type: h.type ?? 'file', size: h.size ?? 0 });
    stream.on('end', next);
    stream.resume();
  });
  const done = new Promise((r, j) => {
    ex.on('finish', () => r(undefined));
    ex.on('error', j);
  });
  ex.end(tar);
  await done;
  return out;
}

for (const [typeflag, kind] of [
  ['5', 'directory'],
  ['2', 'symlink'],
  ['1', 'link'],
] as const)
  test(`a ${kind} entry that carries data is refused, and nothing is thrown outside the call`, async () => {
    const tar = await tarOf([
      { name: 'odd', body: 'x'.repeat(600) },
      { name: 'after.txt', body: 'kept' },
    ]);
    retype(tar, 0, typeflag);
    let escaped: unknown = null;
    const onUncaught = (err: unknown) => {
      escaped = err;
    };
    process.on('uncaughtException', onUncaught);
    try {
      await assert.rejects(rewriteUpload(tar, { uid: 1000, gid: 1000 }), (err: Error) => {
        assert.ok(err instanceof UploadRefused, `${err.constructor.name}: ${err.message}`);
        assert.match(err.message, new RegExp(`'odd': a ${kind} entry cannot carry data`));
        return true;
      });
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    assert.equal(escaped, null, `an exception escaped: ${escaped}`);
  });

test('a well-formed archive is rewritten for the owner', async () => {
  const out = await rewriteUpload(await tarOf([{ name: 'a.txt', body: 'hello' }]), { uid: 1000, gid: 1000 });
  assert.deepEqual(await namesIn(out), [{ name: 'a.txt', type: 'file', size: 5 }]);
});
