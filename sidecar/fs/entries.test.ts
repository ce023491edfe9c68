// A listing is read exactly from both of find's outputs (GNU -printf, busybox/coreutils stat), a
// name holding a newline included, and stops at its limit; a watch tells create, write, rename
// and remove apart by path and inode, and never reports the file API's own temporary files.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Listed, parseListing } from './entries.ts';
import { isTemp } from './transfer.ts';
import { diff } from './watch.ts';

const record = (head: string, path: string) => Buffer.from(`${head}\n${path}\0`);

test('GNU and stat records give the same entries, newlines in names kept', () => {
  const out = Buffer.concat([
    record('d 755 4096 1795780684.25 11', '/w/dir'),
    record('f 4755 5 1795780684 12', '/w/odd\nname'),
    record('l 777 4 1795780684 13', '/w/link'),
    record('41ed 4096 1795780684 21', '/b/dir'),
    record('81a4 5 1795780684 22', '/b/odd\nname'),
    record('a1ff 4 1795780684 23', '/b/link'),
    record('2190 0 1795780684 24', '/b/null'),
    record('11a4 0 1795780684 25', '/b/fifo'),
  ]);
  const { listed, complete } = parseListing(out, 100);
  assert.equal(complete, true);
  const view = listed.map((l) => [
    l.entry.path,
    l.entry.name,
    l.entry.type,
    l.entry.mode,
    l.entry.size,
    l.inode,
  ]);
  assert.deepEqual(view, [
    ['/w/dir', 'dir', 'dir', 0o755, 4096, '11'],
    ['/w/odd\nname', 'odd\nname', 'file', 0o4755, 5, '12'],
    ['/w/link', 'link', 'symlink', 0o777, 4, '13'],
    ['/b/dir', 'dir', 'dir', 0o755, 4096, '21'],
    ['/b/odd\nname', 'odd\nname', 'file', 0o644, 5, '22'],
    ['/b/link', 'link', 'symlink', 0o777, 4, '23'],
    ['/b/null', 'null', 'other', 0o620, 0, '24'],
    ['/b/fifo', 'fifo', 'other', 0o644, 0, '25'],
  ]);
  assert.equal(listed[0].entry.mtime, new Date(1795780684250).toISOString());
});

test('a listing stops at its limit and says it was cut; a partial record is dropped', () => {
  const out = Buffer.concat([
    record('81a4 1 1 1', '/a'),
    record('81a4 1 1 2', '/b'),
    record('81a4 1 1 3', '/c'),
  ]);
  const two = parseListing(out, 2);
  assert.deepEqual(
    two.listed.map((l) => l.entry.path),
    ['/a', '/b'],
  );
  assert.equal(two.complete, false);
  const cut = parseListing(
    Buffer.concat([record('81a4 1 1 1', '/a'), Buffer.from('81a4 1 1 2\n/b-no-end')]),
    10,
  );
  assert.deepEqual(
    cut.listed.map((l) => l.entry.path),
    ['/a'],
  );
  assert.equal(cut.complete, false);
});

const file = (path: string, inode: string, size = 1, mtime = '2026-01-01T00:00:00.000Z'): Listed => ({
  entry: { name: path.slice(1), path, type: 'file', size, mode: 0o644, mtime },
  inode,
});
const map = (l: Listed[]) => new Map(l.map((x) => [x.entry.path, x]));

test('a watch tells create, write, rename and remove apart', () => {
  const before = map([file('/a', '1'), file('/b', '2'), file('/c', '3'), file('/d', '4')]);
  const after = [
    file('/a', '1', 2), // written in place
    file('/b2', '2'), // renamed
    file('/d', '9'), // replaced by another file (an atomic write)
    file('/e', '5'), // new
  ];
  assert.deepEqual(diff(before, after), [
    { type: 'write', path: '/a' },
    { type: 'rename', from: '/b', path: '/b2' },
    { type: 'write', path: '/d' },
    { type: 'create', path: '/e' },
    { type: 'remove', path: '/c' },
  ]);
  assert.deepEqual(diff(map(after), after), []);
  // A move over an existing file: the moved inode now at the target, the source gone.
  assert.deepEqual(diff(map([file('/x', '1'), file('/y', '2')]), [file('/y', '1')]), [
    { type: 'rename', from: '/x', path: '/y' },
  ]);
});

test("the file API's temporary names are recognised, and only they", () => {
  assert.equal(isTemp('.a.txt.svc-0123456789ab'), true);
  assert.equal(isTemp('.a.txt.svc-0123'), false);
  assert.equal(isTemp('a.txt.svc-0123456789ab'), false);
});
