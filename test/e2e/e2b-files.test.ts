// Files through the real `e2b` SDK (`sandbox.files`: envd's /files and filesystem.Filesystem)
// against svc-server + a real svcd on Docker, acting in the sandbox's container.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FileType, NotFoundError, Sandbox } from 'e2b';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, type Real, startReal } from './real.ts';

/** The files of a limit small enough to pass in a test (SVC_FS_MAX_FILE_BYTES). */
const MAX_FILE = 1024 * 1024;

describe('E2B SDK files against svc on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let s: Sandbox;
  let envId = '';
  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_E2B_ADDR: '127.0.0.1:0', SVC_FS_MAX_FILE_BYTES: String(MAX_FILE) } });
    const url = r.t.server.e2b?.url ?? '';
    s = await Sandbox.create(BUSYBOX_IMAGE, { apiUrl: url, sandboxUrl: url, apiKey: r.t.key });
    const row = await r.t.server.ctx.db.get<{ env_id: string }>(
      'SELECT env_id FROM e2b_sandboxes WHERE id = ?',
      [s.sandboxId],
    );
    envId = row?.env_id ?? '';
  });
  after(async () => {
    await s?.kill().catch(() => {});
    await r?.close();
  });

  test('text and binary files go in and out; they are in the container', async () => {
    const info = await s.files.write('/work/hello.txt', 'hi there\n');
    assert.equal(info.path, '/work/hello.txt');
    assert.equal(info.name, 'hello.txt');
    assert.equal(await s.files.read('/work/hello.txt'), 'hi there\n');
    assert.equal((await exec(r.t, envId, 'main', ['cat', '/work/hello.txt'])).stdout, 'hi there\n');
    const bytes = new Uint8Array(256).map((_, i) => i);
    await s.files.write('/work/bin', bytes.buffer);
    assert.deepEqual(await s.files.read('/work/bin', { format: 'bytes' }), bytes);
    // Several files in one multipart request, each part named by its path.
    const many = await s.files.write([
      { path: '/work/a.txt', data: 'a' },
      { path: '/work/b.txt', data: 'b' },
    ]);
    assert.deepEqual(
      many.map((x) => x.path),
      ['/work/a.txt', '/work/b.txt'],
    );
    // A relative path is under the user's home.
    await s.files.write('rel.txt', 'home');
    assert.equal(await s.files.read('/root/rel.txt'), 'home');
  });

  test('list, exists, getInfo, makeDir, rename, remove; a missing path is NotFoundError', async () => {
    assert.equal(await s.files.makeDir('/work/dir'), true);
    assert.equal(await s.files.makeDir('/work/dir'), false, 'already there');
    await s.files.write('/work/dir/x.txt', 'x');
    const listed = await s.files.list('/work/dir');
    assert.deepEqual(
      listed.map((e) => [e.name, e.type]),
      [['x.txt', FileType.FILE]],
    );
    const dir = await s.files.getInfo('/work/dir');
    assert.equal(dir.type, FileType.DIR);
    assert.equal(await s.files.exists('/work/dir/x.txt'), true);
    const moved = await s.files.rename('/work/dir/x.txt', '/work/dir/y.txt');
    assert.equal(moved.path, '/work/dir/y.txt');
    assert.equal(await s.files.exists('/work/dir/x.txt'), false);
    await s.files.remove('/work/dir');
    assert.equal(await s.files.exists('/work/dir'), false);
    await assert.rejects(s.files.read('/work/nope.txt'), NotFoundError);
    await assert.rejects(s.files.getInfo('/work/nope.txt'), NotFoundError);
    await assert.rejects(s.files.list('/work/nope'), NotFoundError);
  });

  test('watchDir reports a file written after it started', async () => {
    await s.files.makeDir('/work/watched');
    const seen: string[] = [];
    let got: () => void = () => {};
    const arrived = new Promise<void>((res) => {
      got = res;
    });
    const handle = await s.files.watchDir('/work/watched', (e) => {
      seen.push(`${e.type}:${e.name}`);
      if (e.name === 'new.txt') got();
    });
    await s.files.write('/work/watched/new.txt', 'n');
    await arrived;
    await handle.stop();
    assert.ok(
      seen.some((x) => x.endsWith(':new.txt')),
      seen.join(','),
    );
  });

  test('a write over the upload limit is refused with a clear error, and nothing is written', async () => {
    await assert.rejects(s.files.write('/work/big', new Uint8Array(MAX_FILE + 1).buffer), (e: Error) =>
      /over the .*limit/.test(e.message),
    );
    assert.equal(await s.files.exists('/work/big'), false);
    assert.equal(await s.files.read('/work/hello.txt'), 'hi there\n', 'the sandbox still answers');
  });
});
