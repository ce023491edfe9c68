// Uploads are collected (server/uploads/sweep.ts): an old upload no version uses goes, row and
// files; one a live environment's version was deployed with stays until that environment is
// destroyed; one a deploy named within the grace period stays however old it is; files without a
// row (and interrupted uploads) go after the grace period.
import assert from 'node:assert/strict';
import { existsSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import tar from 'tar-stream';
import { sweepUploads } from '../../server/uploads/sweep.ts';
import { archivePath } from '../../server/uploads/uploads.ts';
import { assertAliveAfter } from '../support/alive.ts';
import { createProject } from '../support/api.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const HOUR = 3600_000;
const COMPOSE = 'services:\n  app:\n    image: busybox:1\n    volumes: ["./conf:/etc/app:ro"]\n';

async function context(text = `n=${Math.random()}\n`): Promise<Buffer> {
  const p = tar.pack();
  p.entry({ name: 'conf/app.conf', mtime: new Date(0) }, text);
  p.finalize();
  const parts: Buffer[] = [];
  for await (const c of p) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

forEachDialect('uploads are collected when nothing live uses them', (dialect) => {
  let s: TestServer;
  let sc: FakeSidecar;
  let dir = '';
  const upload = async (text?: string): Promise<string> => {
    const r = await s.req('PUT', '/v1/uploads', {
      raw: await context(text),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    return r.body.upload;
  };
  const rows = async () =>
    (await s.server.ctx.db.all<{ id: string }>('SELECT id FROM uploads ORDER BY id')).map((r) => r.id);
  const until = async (id: string) => {
    for (let i = 0; i < 500; i++) {
      const d = (await s.req('GET', `/v1/deployments/${id}`)).body.deployment;
      if (d.FinishedAt) return d;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`deployment ${id} did not finish`);
  };

  before(async () => {
    s = await startTestServer(dialect, { SVC_UPLOADS_SWEEP_EVERY: '0' });
    dir = s.server.ctx.config.uploadsDir;
    const jt = await s.req('POST', '/v1/join-tokens', { body: {} });
    sc = await new FakeSidecar(s.url).connect(jt.body.token);
    await createProject(s, 'gc');
  });
  after(async () => {
    await sc?.close();
    await s?.close();
  });

  test('a referenced upload survives, an unreferenced old one goes; destroying the env frees the other', async () => {
    const used = await upload();
    const unused = await upload();
    const d = await s.req('POST', '/v1/projects/gc/deploy', { body: { compose: COMPOSE, context: used } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const dep = await until(d.body.deployment.ID);
    assert.equal(dep.Status, 'succeeded', dep.Error);

    // Within the grace period nothing goes.
    const young = await sweepUploads(s.server.ctx.db, dir, HOUR);
    assert.deepEqual(young.deleted, []);
    assert.ok((await rows()).includes(unused));

    const later = Date.now() + 2 * HOUR;
    const swept = await sweepUploads(s.server.ctx.db, dir, HOUR, later);
    assert.deepEqual(swept.deleted, [unused]);
    assert.equal(swept.kept, 1);
    assert.deepEqual(await rows(), [used]);
    assert.equal(existsSync(archivePath(dir, unused)), false, 'the archive file is gone');
    assert.equal(existsSync(join(dir, `${unused}.json`)), false, 'its index is gone');
    assert.equal(existsSync(archivePath(dir, used)), true);
    const redeploy = await s.req('POST', '/v1/projects/gc/deploy', {
      body: { env: 'other', compose: COMPOSE, context: unused },
    });
    assert.equal(redeploy.status, 404, 'a collected upload is not found');

    const destroyed = await s.req('DELETE', `/v1/envs/${dep.EnvID}`);
    assert.equal(destroyed.status, 202, JSON.stringify(destroyed.body));
    assert.equal((await until(destroyed.body.deployment.ID)).Status, 'succeeded');
    const after = await sweepUploads(s.server.ctx.db, dir, HOUR, later);
    assert.deepEqual(after.deleted, [used], 'a destroyed environment keeps nothing alive');
    assert.equal(existsSync(archivePath(dir, used)), false);
    await assertAliveAfter(s.url, 0);
  });

  test('an old upload a deploy names within the grace period is kept; orphaned files go', async () => {
    const old = await upload();
    const twoDaysAgo = new Date(Date.now() - 48 * HOUR).toISOString();
    await s.server.ctx.db.run('UPDATE uploads SET created_at = ? WHERE id = ?', [twoDaysAgo, old]);
    // A deploy in flight has named it (even one refused later: the name is what counts).
    const named = await s.req('POST', '/v1/projects/gc/deploy', {
      body: { env: 'named', compose: 'services: {}\n', context: old },
    });
    assert.equal(named.status, 400);
    const kept = await sweepUploads(s.server.ctx.db, dir, HOUR);
    assert.ok(!kept.deleted.includes(old));
    assert.ok((await rows()).includes(old));

    const stale = Date.now() / 1000 - 3 * 3600;
    for (const name of ['upl_00000000000000000000zz.tar', 'upl_00000000000000000000zz.json', 'x.part']) {
      writeFileSync(join(dir, name), 'left behind');
      utimesSync(join(dir, name), stale, stale);
    }
    const fresh = join(dir, 'upl_00000000000000000000yy.tar');
    writeFileSync(fresh, 'being written');
    const swept = await sweepUploads(s.server.ctx.db, dir, HOUR);
    assert.equal(swept.orphans, 3);
    assert.equal(existsSync(join(dir, 'x.part')), false);
    assert.equal(existsSync(fresh), true, 'a file younger than the grace period stays');
    assert.equal(existsSync(archivePath(dir, old)), true, 'a file with a row stays');
    await assertAliveAfter(s.url, 0);
  });

  test('the same bytes uploaded again answer with the first upload, marked used', async () => {
    const first = await upload('same bytes\n');
    const old = new Date(Date.now() - 48 * HOUR).toISOString();
    await s.server.ctx.db.run('UPDATE uploads SET created_at = ?, used_at = ? WHERE id = ?', [
      old,
      old,
      first,
    ]);
    assert.equal(await upload('same bytes\n'), first);
    assert.notEqual(await upload('other bytes\n'), first);
    const swept = await sweepUploads(s.server.ctx.db, dir, HOUR);
    assert.ok(!swept.deleted.includes(first), 'uploading it again counts as a use');
  });
});
