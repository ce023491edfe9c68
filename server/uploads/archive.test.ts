// Context archives: streamed to disk under a byte limit (413 past it), indexed with the entries
// no project needs refused by name, raw tar and tar.gz alike.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import tar from 'tar-stream';
import { DEFAULT_UPLOAD_LIMITS } from '../config/config.ts';
import { BadRequest, TooLarge } from '../errors.ts';
import { indexArchive, readFiles, receive } from './archive.ts';

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), 'svc-archive-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function tarOf(entries: (Partial<tar.Header> & { name: string; body?: string })[]): Promise<Buffer> {
  const p = tar.pack();
  for (const { body, ...h } of entries) p.entry(h as tar.Header, body ?? '');
  p.finalize();
  const parts: Buffer[] = [];
  for await (const c of p) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

const file = (name: string, data: Buffer) => {
  const path = join(dir, name);
  writeFileSync(path, data);
  return path;
};

describe('context archives', () => {
  it('streams to disk with a sha256, and refuses past the limit with 413', async () => {
    const got = await receive(Readable.from([Buffer.alloc(600), Buffer.alloc(400)]), join(dir, 'ok'), 1000);
    assert.equal(got.bytes, 1000);
    assert.match(got.sha256, /^[0-9a-f]{64}$/);
    await assert.rejects(
      receive(Readable.from([Buffer.alloc(600), Buffer.alloc(401)]), join(dir, 'big'), 1000),
      (err) => err instanceof TooLarge,
    );
    await assert.rejects(receive(Readable.from([]), join(dir, 'empty')), (err) => err instanceof BadRequest);
  });

  it('indexes raw and gzip tars: files, directories, links; reads the wanted files', async () => {
    const t = await tarOf([
      { name: './.env', body: 'A=1\n' },
      { name: 'conf/', type: 'directory' },
      { name: 'conf/x.yml', body: 'x: 1\n' },
      { name: 'deep/er/file', body: 'z' },
      { name: 'link', type: 'symlink', linkname: 'conf' },
    ]);
    for (const data of [t, gzipSync(t)]) {
      const path = file(`t${data.length}`, data);
      const entries = await indexArchive(path);
      assert.deepEqual(Object.fromEntries(entries), {
        '.env': { kind: 'file', size: 4 },
        conf: { kind: 'dir', size: 0 },
        'conf/x.yml': { kind: 'file', size: 5 },
        deep: { kind: 'dir', size: 0 },
        'deep/er': { kind: 'dir', size: 0 },
        'deep/er/file': { kind: 'file', size: 1 },
        link: { kind: 'symlink', size: 0, link: 'conf' },
      });
      const files = await readFiles(path, new Set(['.env', 'conf/x.yml']), 1024);
      assert.deepEqual(Object.fromEntries(files), { '.env': 'A=1\n', 'conf/x.yml': 'x: 1\n' });
    }
  });

  it('refuses climbing and absolute paths, hard links, devices, and what is not a tar', async () => {
    const cases: [Partial<tar.Header> & { name: string }, string][] = [
      [{ name: '../up' }, "'../up' is absolute or has '..'"],
      [{ name: '/etc/passwd' }, "'/etc/passwd' is absolute or has '..'"],
      [{ name: 'hard', type: 'link', linkname: 'x' }, "'hard' is a hard link"],
      [{ name: 'dev', type: 'character-device' }, "'dev' is a character-device"],
      [{ name: 'pipe', type: 'fifo' }, "'pipe' is a fifo"],
    ];
    for (const [h, phrase] of cases) {
      const path = file(`bad-${h.name.replaceAll('/', '_')}`, await tarOf([h]));
      await assert.rejects(
        indexArchive(path),
        (err: Error) => err instanceof BadRequest && err.message.includes(phrase),
      );
    }
    const junk = file('junk', Buffer.from('x'.repeat(2048)));
    await assert.rejects(
      indexArchive(junk),
      (err: Error) => err instanceof BadRequest && /not a tar archive/.test(err.message),
    );
  });

  it('counts every block read toward the unpacked bound: a gzip of zero blocks is refused', async () => {
    // One small file, then 8 MiB of zero blocks (tar readers skip them): 8 KiB gzipped.
    const bomb = gzipSync(Buffer.concat([await tarOf([{ name: 'a', body: 'x' }]), Buffer.alloc(8 * MiB)]));
    assert.ok(bomb.length < 64 * 1024);
    const path = file('bomb.tgz', bomb);
    const bounds = { ...DEFAULT_UPLOAD_LIMITS, maxUnpackedBytes: 4 * MiB };
    await assert.rejects(
      indexArchive(path, bounds),
      (err: Error) => err instanceof TooLarge && /unpacks to more than 4 MiB/.test(err.message),
    );
    // Within the bound the same archive is read to its end.
    const entries = await indexArchive(path, { ...bounds, maxUnpackedBytes: 9 * MiB });
    assert.deepEqual([...entries.keys()], ['a']);
  });

  it('bounds the time a check may take: past it, 413 and the streams are closed', async () => {
    const path = file('slow.tgz', gzipSync(Buffer.alloc(64 * MiB)));
    await assert.rejects(
      indexArchive(path, { ...DEFAULT_UPLOAD_LIMITS, checkMs: 1 }),
      (err: Error) => err instanceof TooLarge && /took longer than 0.001 s/.test(err.message),
    );
  });
  it('adds each ancestor directory once, and refuses a path deeper than 256 directories', async () => {
    const deep = (n: number, leaf: string) => `${Array.from({ length: n }, () => 'a').join('/')}/${leaf}`;
    const ok = file('deep-ok.tar', await tarOf([{ name: deep(200, 'x') }, { name: deep(200, 'y') }]));
    const entries = await indexArchive(ok);
    // 200 directories, shared by both files.
    assert.equal(entries.size, 202);
    assert.equal(entries.get(deep(199, 'a'))?.kind, 'dir');
    const tooDeep = file('deep-no.tar', await tarOf([{ name: deep(300, 'x') }]));
    await assert.rejects(
      indexArchive(tooDeep),
      (err: Error) => err instanceof BadRequest && /more than 256 directories deep/.test(err.message),
    );
    // Ancestors count toward the entry bound.
    await assert.rejects(
      indexArchive(ok, { ...DEFAULT_UPLOAD_LIMITS, maxEntries: 100 }),
      (err: Error) => err instanceof BadRequest && /more than 100 entries/.test(err.message),
    );
  });
});
