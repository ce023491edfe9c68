// The context on the host: a build context is read without following links (a link planted in the
// context since the parse cannot reach the host), and a context is only accepted with its digest.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, describe, it } from 'node:test';
import tar from 'tar-stream';
import { contextTar } from './build.ts';
import { ensureContext } from './project.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-ctx-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** `name kind content-or-link` of each entry of a tar stream. */
async function tarEntries(stream: NodeJS.ReadableStream): Promise<string[]> {
  const out: string[] = [];
  const ex = tar.extract();
  stream.pipe(ex);
  for await (const entry of ex) {
    const chunks: Buffer[] = [];
    for await (const c of entry) chunks.push(c as Buffer);
    const h = entry.header;
    out.push(`${h.name} ${h.type} ${h.type === 'symlink' ? h.linkname : Buffer.concat(chunks).toString()}`);
  }
  return out;
}

describe('project context on the host', () => {
  it('a build context is packed without following a link, and a link on the way to it is refused', async () => {
    const files = join(root, 'ctx', 'files');
    mkdirSync(join(files, 'app', 'sub'), { recursive: true });
    writeFileSync(join(files, 'app', 'Dockerfile'), 'FROM scratch\n');
    writeFileSync(join(files, 'app', 'sub', 'f'), 'mine\n');
    symlinkSync('/etc', join(files, 'app', 'hostetc'));
    symlinkSync('/etc', join(files, 'linked'));
    symlinkSync('app', join(files, 'inside'));
    const entries = await tarEntries(await contextTar(files, 'app'));
    assert.deepEqual(entries, [
      'Dockerfile file FROM scratch\n',
      'hostetc symlink /etc',
      'sub directory ',
      'sub/f file mine\n',
    ]);
    for (const rel of ['linked', 'inside', 'linked/ssh', 'app/hostetc'])
      await assert.rejects(
        contextTar(files, rel),
        /is a link \(-> '(\/etc|app)'\); links are never followed/,
        rel,
      );
    await assert.rejects(contextTar(files, 'app/Dockerfile'), /is a regular file, not a directory/);
  });

  it('a .dockerignore over 1 MiB fails the build context instead of being read whole', async () => {
    const files = join(root, 'big-ignore', 'files');
    mkdirSync(join(files, 'app'), { recursive: true });
    writeFileSync(join(files, 'app', 'Dockerfile'), 'FROM scratch\n');
    writeFileSync(join(files, 'app', '.dockerignore'), 'x\n'.repeat(600 * 1024));
    // As Docker's client does, the consumer hears the stream's error.
    await assert.rejects(
      pipeline(await contextTar(files, 'app'), new Writable({ write: (_c, _e, done) => done() })),
      /\.dockerignore is 1228800 bytes, over the 1048576 byte limit/,
    );
    writeFileSync(join(files, 'app', '.dockerignore'), 'ignored\n');
    writeFileSync(join(files, 'app', 'ignored'), 'no');
    assert.deepEqual(await tarEntries(await contextTar(files, 'app')), [
      '.dockerignore file ignored\n',
      'Dockerfile file FROM scratch\n',
    ]);
  });

  it('a build context file that grows while it is packed is packed at the size it was pinned with', async () => {
    const files = join(root, 'growing', 'files');
    mkdirSync(join(files, 'app'), { recursive: true });
    // Large enough that packing stalls on back-pressure long before the file's end is read.
    const first = Buffer.alloc(8 * 1024 * 1024, 'a');
    writeFileSync(join(files, 'app', 'log'), first);
    writeFileSync(join(files, 'app', 'z'), '');
    const ex = tar.extract();
    // pipeline: a stream error reaches the loop below instead of leaving it waiting.
    pipeline(await contextTar(files, 'app'), ex).catch(() => {});
    const got: string[] = [];
    for await (const entry of ex) {
      // The header of 'log' is out, so it was pinned: a running service appends to it now.
      if (entry.header.name === 'log') appendFileSync(join(files, 'app', 'log'), 'more bytes');
      let bytes = 0;
      let same = true;
      for await (const c of entry) {
        same &&= (c as Buffer).every((b) => b === 0x61);
        bytes += (c as Buffer).length;
      }
      got.push(`${entry.header.name} ${entry.header.size} ${bytes} ${same}`);
    }
    assert.deepEqual(got, [`log ${first.length} ${first.length} true`, 'z 0 0 true']);
  });

  it('a build context file cut short while it is packed fails the tar, and nothing escapes', async () => {
    const files = join(root, 'shrinking', 'files');
    mkdirSync(join(files, 'app'), { recursive: true });
    writeFileSync(join(files, 'app', 'log'), Buffer.alloc(8 * 1024 * 1024, 'a'));
    const ex = tar.extract();
    const packed = await contextTar(files, 'app');
    const failed = new Promise<Error>((resolve) => packed.once('error', resolve));
    pipeline(packed, ex).catch(() => {});
    await assert.rejects(async () => {
      for await (const entry of ex) {
        // The header of 'log' is out, so it was pinned: a running service truncates it now.
        truncateSync(join(files, 'app', 'log'), 0);
        for await (const _ of entry);
      }
    });
    assert.match((await failed).message, /Size mismatch/);
  });

  it('fetches once per digest, refuses other bytes, and never writes behind a link', async () => {
    const src = join(root, 'src');
    mkdirSync(join(src, 'a'), { recursive: true });
    execFileSync('sh', ['-c', `echo hi > ${src}/a/f && ln -s a ${src}/l`]);
    const tar = execFileSync('tar', ['-C', src, '-czf', '-', '.']);
    const sha = createHash('sha256').update(tar).digest('hex');
    let fetches = 0;
    const server = createServer((_req, res) => {
      fetches++;
      res.end(tar);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/blob`;
    try {
      const dataset = join(root, 'ds2');
      mkdirSync(dataset);
      const lines: string[] = [];
      assert.equal(
        await ensureContext(dataset, { sha256: sha, blob: { url, token: 't' } }, (l) => lines.push(l)),
        'fetched',
      );
      assert.equal(readFileSync(join(dataset, 'files', 'l', 'f'), 'utf8'), 'hi\n');
      assert.equal(
        await ensureContext(dataset, { sha256: sha, blob: { url, token: 't' } }, () => {}),
        'kept',
      );
      assert.equal(fetches, 1);
      await assert.rejects(
        ensureContext(join(root, 'ds2'), { sha256: 'a'.repeat(64), blob: { url, token: 't' } }, () => {}),
        /the project context's digest is/,
      );
      const evil = join(root, 'evil');
      mkdirSync(evil);
      execFileSync('sh', [
        '-c',
        `cd ${evil} && ln -s /tmp l && tar -cf ${root}/evil.tar l && rm l && mkdir l && echo x > l/planted && tar -rf ${root}/evil.tar l/planted`,
      ]);
      const evilTar = readFileSync(join(root, 'evil.tar'));
      const evilServer = createServer((_req, res) => res.end(evilTar));
      await new Promise<void>((r) => evilServer.listen(0, '127.0.0.1', () => r()));
      const evilUrl = `http://127.0.0.1:${(evilServer.address() as { port: number }).port}/blob`;
      const ds3 = join(root, 'ds3');
      mkdirSync(ds3);
      const evilSha = createHash('sha256').update(evilTar).digest('hex');
      await assert.rejects(
        ensureContext(ds3, { sha256: evilSha, blob: { url: evilUrl, token: 't' } }, () => {}),
        /lies behind a link/,
      );
      evilServer.close();
    } finally {
      server.close();
    }
  });
});
