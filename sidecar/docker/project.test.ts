// The context on the host: bind sources resolve inside it or nothing starts (a link planted in the
// context since the parse cannot reach the host), and a context is only accepted with its digest.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { bindSources, ensureContext } from './project.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-ctx-'));
after(() => rmSync(root, { recursive: true, force: true }));

const svc = (binds: ServiceRecord['binds']) => ({ name: 'app', binds }) as ServiceRecord;

describe('project context on the host', () => {
  it('bind sources resolve inside the context; missing ones are created; links out are refused', async () => {
    const dataset = join(root, 'ds1');
    mkdirSync(join(dataset, 'files', 'conf'), { recursive: true });
    symlinkSync('/etc', join(dataset, 'files', 'out'));
    symlinkSync('conf', join(dataset, 'files', 'in'));
    const ok = await bindSources(dataset, [
      svc([
        { source: 'conf', target: '/c', read_only: true },
        { source: 'in', target: '/i', read_only: true },
        { source: 'new/dir', target: '/n', read_only: false },
      ]),
    ]);
    assert.deepEqual(
      [...ok.values()].map((p) => p.slice(dataset.length)),
      ['/files/conf', '/files/conf', '/files/new/dir'],
    );
    await assert.rejects(
      bindSources(dataset, [svc([{ source: 'out/passwd', target: '/x', read_only: true }])]),
      /the bind of '.\/out\/passwd' resolves outside the project context/,
    );
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
