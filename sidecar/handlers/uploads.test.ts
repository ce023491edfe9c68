// Uploads on real Docker through env.put: a 10 KiB PAX-sparse tar of a 1 GiB file, device
// nodes and FIFOs are refused; a setuid-root file arrives owned by the service's user without its
// setuid bit; nothing is created as given.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pack } from 'tar-stream';
import { MAX_UPLOAD_EXPANDED_BYTES } from '../../protocol/uploads.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, testContext } from './testing.ts';

async function tarOf(
  entries: { name: string; type?: string; mode?: number; body?: string; dev?: [number, number] }[],
) {
  const p = pack();
  for (const e of entries) {
    p.entry(
      {
        name: e.name,
        type: (e.type ?? 'file') as 'file',
        mode: e.mode ?? 0o644,
        uid: 0,
        gid: 0,
        devmajor: e.dev?.[0],
        devminor: e.dev?.[1],
      },
      e.body ?? '',
    );
  }
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('uploads are rewritten before extraction, on real Docker', { skip: tier('docker') }, () => {
  const envId = testEnvId('put');
  let dir: string;
  let ctx: SidecarContext;
  let run: ReturnType<typeof commandRunner>;
  const put = (data: Buffer, path = '/work/in') =>
    run('env.put', { service: 'main', path, tar_b64: data.toString('base64') });
  const sh = async (script: string) =>
    (await engineOf(ctx, envId).exec('main', ['sh', '-c', script])).stdout.trim();

  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-put-'));
    ctx = await testContext(join(dir, 'data'));
    run = commandRunner(ctx, envId, 'put');
    const r = await run('env.create', {
      version: 'ver_1',
      services: [svc('main', BUSYBOX_IMAGE, { user: '1000:1000', volumes: ['work:/work'] })],
      volumes: ['work'],
      from_snapshot: '',
      warm: null,
      egress: 'allow',
      agent: 'main',
      disk_mb: 2048,
    });
    assert.equal(r.ok, true, r.error);
  });
  after(async () => {
    await run('env.destroy', {}).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('a PAX-sparse archive of a 1 GiB file is refused at its real size', async () => {
    const file = join(dir, 'hole');
    writeFileSync(file, '');
    truncateSync(file, 1024 * 1024 * 1024);
    execFileSync('tar', ['--sparse', '--format=pax', '-C', dir, '-cf', join(dir, 'sparse.tar'), 'hole']);
    const data = readFileSync(join(dir, 'sparse.tar'));
    assert.ok(data.length < 64 * 1024, `the sparse tar is ${data.length} bytes`);
    const r = await put(data);
    assert.equal(r.ok, false);
    assert.match(
      r.error ?? '',
      new RegExp(
        `archive expands to ${1024 ** 3} bytes, over the ${MAX_UPLOAD_EXPANDED_BYTES >> 20} MiB limit`,
      ),
    );
    assert.equal(await sh('ls /work/in 2>&1 | grep -c hole || true'), '0');
  });

  test('device nodes and FIFOs are refused; nothing of the archive is extracted', async () => {
    for (const [type, dev] of [
      ['block-device', [254, 0]],
      ['character-device', [1, 1]],
      ['fifo', undefined],
    ] as const) {
      const data = await tarOf([
        { name: 'ok.txt', body: 'fine' },
        { name: 'dev0', type, dev: dev as [number, number] | undefined },
      ]);
      const r = await put(data, '/work/dev');
      assert.equal(r.ok, false, type);
      assert.match(r.error ?? '', /upload refused: 'dev0': (device nodes|FIFOs) are not accepted/);
    }
    assert.equal(await sh('ls -A /work/dev 2>/dev/null | wc -l'), '0');
  });

  test("a setuid-root file arrives as the service's user without setuid or setgid bits", async () => {
    const data = await tarOf([
      { name: 'bin/', type: 'directory', mode: 0o2755 },
      { name: 'bin/rootshell', mode: 0o6755, body: '#!/bin/sh\nid\n' },
    ]);
    const r = await put(data, '/work/up/deep');
    assert.equal(r.ok, true, r.error);
    assert.equal(await sh('stat -c "%a %u %g" /work/up/deep/bin/rootshell'), '755 1000 1000');
    assert.equal(await sh('stat -c "%a %u" /work/up/deep/bin'), '755 1000');
    assert.equal(
      await sh('stat -c "%u" /work/up/deep'),
      '1000',
      'created directories belong to the service user',
    );
  });
});
