// The context on the host: a build context is read without following links (a link planted in the
// context since the parse cannot reach the host), and a context is only accepted with its digest.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
