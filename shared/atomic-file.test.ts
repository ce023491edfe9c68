// The one atomic file write: the target is replaced whole, with exactly the mode asked for, no
// temp file is left behind (after success or failure), and concurrent writers of one path each
// leave a whole file (the last rename wins).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { writeFileAtomic, writeFileAtomicSync } from './atomic-file.ts';

const dir = mkdtempSync(join(tmpdir(), 'svc-atomic-'));
after(() => rmSync(dir, { recursive: true, force: true }));

for (const [name, write] of [
  ['writeFileAtomic', writeFileAtomic],
  ['writeFileAtomicSync', async (...a: Parameters<typeof writeFileAtomicSync>) => writeFileAtomicSync(...a)],
] as const) {
  test(`${name}: replaces the file whole, with exactly the mode asked for, and leaves no temp file`, async () => {
    const sub = mkdtempSync(join(dir, 'w-'));
    const path = join(sub, 'state.json');
    writeFileSync(path, 'old and much longer than the new text');
    const umask = process.umask(0o077);
    try {
      await write(path, 'new', { mode: 0o640 });
    } finally {
      process.umask(umask);
    }
    assert.equal(readFileSync(path, 'utf8'), 'new');
    assert.equal(statSync(path).mode & 0o777, 0o640, 'the umask does not narrow the mode');
    await write(path, Buffer.from('bytes'));
    assert.equal(readFileSync(path, 'utf8'), 'bytes');
    await write(path, 'not flushed', { durable: false });
    assert.equal(readFileSync(path, 'utf8'), 'not flushed');
    assert.deepEqual(readdirSync(sub), ['state.json']);
  });

  test(`${name}: a failed write throws, keeps the old file and leaves no temp file`, async () => {
    const sub = mkdtempSync(join(dir, 'f-'));
    const path = join(sub, 'target');
    writeFileSync(join(sub, 'keep'), 'kept');
    const blocked = join(sub, 'blocked');
    await assert.rejects(
      Promise.resolve().then(() => write(join(blocked, 'x'), 'never')),
      { code: 'ENOENT' },
    );
    mkdirSync(path);
    await assert.rejects(Promise.resolve().then(() => write(path, 'over a directory')));
    // A directory cannot be replaced by a file: that rename fails after the temp file was written.
    assert.equal(readFileSync(join(sub, 'keep'), 'utf8'), 'kept');
    assert.deepEqual(readdirSync(sub).sort(), ['keep', 'target']);
  });
}

test('concurrent writers of one path each leave a whole file, and no temp file is left', async () => {
  const sub = mkdtempSync(join(dir, 'c-'));
  const path = join(sub, 'spec.json');
  const texts = Array.from({ length: 20 }, (_, i) =>
    JSON.stringify({ writer: i, pad: 'x'.repeat(64 * 1024) }),
  );
  await Promise.all(texts.map((t) => writeFileAtomic(path, t)));
  assert.ok(texts.includes(readFileSync(path, 'utf8')));
  assert.deepEqual(readdirSync(sub), ['spec.json']);
});
