import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import tar from 'tar-stream';
import type { Provisioner } from '../../server/deployments/deps.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { tarOf } from '../support/tar.ts';
import { deploy, finished, SIMPLE_COMPOSE, type World, world } from './harness.ts';

forEachDialect('provision and join through a cloud', (dialect) => {
  let t: TestServer;
  const made: string[] = [];
  // Stands in for a VM cloud: "creating a machine" starts a fake sidecar that joins with the token.
  const provisioner: Provisioner = {
    async provision(_cloud, req) {
      made.push(req.joinToken);
      setTimeout(() => void new FakeSidecar(req.serverUrl).connect(req.joinToken), 50);
      return { ref: `vm-${made.length}`, ip: '203.0.113.7', name: req.name };
    },
  };
  before(async () => {
    t = await startTestServer(
      dialect,
      {},
      { orchestrator: { provisioners: new Map([['cloudvm', provisioner]]) } },
    );
  });
  after(async () => t.close());

  test('with no host and no provisioning cloud the deploy fails with the spec message', async () => {
    await t.req('POST', '/v1/projects', { body: { name: 'lonely' } });
    const r = await t.req('POST', '/v1/projects/lonely/deploy', { body: { compose: SIMPLE_COMPOSE } });
    const { deployment, phases } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'failed');
    assert.equal(
      deployment.Error,
      'provision: no connected host and no cloud that can provision: connect a cloud or run the sidecar join on a machine',
    );
    assert.deepEqual(phases[1].Evidence, { host: '', reason: 'no connected host (provisioning)' });
    assert.deepEqual(phases.at(-1).Evidence, { reverted: 'no previous version' });
  });

  test('a cloudvm cloud provisions a machine that joins; the deploy lands on it', async () => {
    const c = await t.req('POST', '/v1/clouds', {
      body: { provider: 'cloudvm', config: { token: 'hc-secret' } },
    });
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const r = await t.req('POST', '/v1/projects/lonely/deploy', { body: { compose: SIMPLE_COMPOSE } });
    const { deployment, phases } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    const byName = Object.fromEntries(phases.map((p: any) => [p.Name, p]));
    assert.deepEqual(byName.provision.Evidence, {
      cloud: c.body.cloud.ID,
      provider: 'cloudvm',
      ref: 'vm-1',
      ip: '203.0.113.7',
      name: byName.provision.Evidence.name,
    });
    assert.match(byName.join.Evidence.host, /^host_/);
    assert.equal(typeof byName.join.Evidence.joined_in_ms, 'number');
    const host = (await t.req('GET', '/v1/hosts')).body.hosts.find(
      (h: any) => h.ID === byName.join.Evidence.host,
    );
    assert.equal(host.CloudID, c.body.cloud.ID);
    const ev = await t.req('GET', `/v1/events?subject=dep:${deployment.ID}`);
    assert.ok(ev.body.events.some((e: any) => e.Kind === 'host.provisioned'));
  });
});

forEachDialect('exec and files', (dialect) => {
  let w: World;
  const files = new Map<string, Buffer>();
  before(async () => {
    w = await world(dialect);
    await deploy(w);
    w.sc.handlers['env.put'] = async (f) => {
      const p = f.payload as any;
      let data = Buffer.from(p.tar_b64, 'base64');
      if (p.blob) {
        const r = await fetch(p.blob.url, { headers: { authorization: `Bearer ${p.blob.token}` } });
        if (!r.ok) throw new Error(`blob fetch ${r.status}`);
        data = Buffer.from(await r.arrayBuffer());
      }
      files.set(p.path, data);
      return { path: p.path };
    };
    w.sc.handlers['env.get'] = async (f) => {
      const p = f.payload as any;
      const data = files.get(p.path);
      if (!data) throw new Error(`stat ${p.path}: no such file or directory`);
      if (data.length > 8 * 1024 * 1024) {
        const r = await fetch(p.upload.url, {
          method: 'PUT',
          headers: { authorization: `Bearer ${p.upload.token}` },
          body: data,
        });
        if (!r.ok) throw new Error(`upload ${r.status}`);
        return { tar_b64: '', uploaded: true, bytes: data.length };
      }
      return { tar_b64: data.toString('base64') };
    };
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  const put = (path: string, body: Buffer, type = 'application/x-tar') =>
    fetch(`${w.t.url}/v1/envs/${w.alpha}/files?service=app&path=${encodeURIComponent(path)}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${w.t.key}`, 'content-type': type },
      body,
    });

  test('exec: the default timeout, the request body checks, unknown services', async () => {
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/exec`, { body: { service: 'app', cmd: ['id'] } });
    assert.equal(r.status, 200);
    assert.deepEqual(w.sc.commands('env.exec').at(-1)!.payload, {
      service: 'app',
      cmd: ['id'],
      timeout_sec: 120,
    });
    for (const body of [
      { service: 'app' },
      { service: 'app', cmd: [] },
      { service: 'app', cmd: 'id' },
      { service: 'app', cmd: ['x'], timeout_sec: -1 },
    ]) {
      assert.equal(
        (await w.t.req('POST', `/v1/envs/${w.alpha}/exec`, { body })).status,
        400,
        JSON.stringify(body),
      );
    }
    const unknown = await w.t.req('POST', `/v1/envs/${w.alpha}/exec`, {
      body: { service: 'nope', cmd: ['id'] },
    });
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.error, /no service 'nope'/);
    assert.equal(
      (await w.t.req('POST', '/v1/envs/env_missing/exec', { body: { service: 'app', cmd: ['id'] } })).status,
      404,
    );
  });

  test('exec and files: a malformed host result is 502 and its command row ends failed, never succeeded', async () => {
    const lastExec = () =>
      w.t.server.ctx.db.get<{ status: string; error: string; result: string | null }>(
        "SELECT status, error, result FROM commands WHERE kind = 'env.exec' ORDER BY created_at DESC, id DESC LIMIT 1",
      );
    for (const bad of [{ exit_code: 'zero', stdout: '', stderr: '' }, { stdout: 'x' }, [1, 2], 'text']) {
      w.sc.handlers['env.exec'] = () => bad;
      const r = await w.t.req('POST', `/v1/envs/${w.alpha}/exec`, { body: { service: 'app', cmd: ['id'] } });
      assert.equal(r.status, 502, JSON.stringify(r.body));
      assert.match(r.body.error, /^malformed env.exec result: /);
      const row = await lastExec();
      assert.equal(row?.status, 'failed', JSON.stringify(bad));
      assert.match(row?.error ?? '', /^malformed env.exec result: /);
      assert.equal(row?.result, null);
    }
    delete w.sc.handlers['env.exec'];
    assert.equal(
      (await w.t.req('POST', `/v1/envs/${w.alpha}/exec`, { body: { service: 'app', cmd: ['id'] } })).status,
      200,
    );
    assert.equal((await lastExec())?.status, 'succeeded');
    // A file download too: the host's answer is checked before anything is sent back.
    const get = w.sc.handlers['env.get'];
    w.sc.handlers['env.get'] = () => ({ tar_b64: 42 });
    const bad = await w.t.req('GET', `/v1/envs/${w.alpha}/files?service=app&path=/data`);
    w.sc.handlers['env.get'] = get;
    assert.equal(bad.status, 502);
    assert.equal(bad.body.error, 'malformed env.get result: tar_b64 must be string');
  });

  test('files: put and get round-trip inline and, above a frame, by blob', async () => {
    const small = await tarOf({ 'a.txt': 'hello' });
    const r = await put('/data/in', small);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { ok: true, bytes: small.length });
    const got = await fetch(`${w.t.url}/v1/envs/${w.alpha}/files?service=app&path=/data/in`, {
      headers: { authorization: `Bearer ${w.t.key}` },
    });
    assert.equal(got.status, 200);
    assert.equal(got.headers.get('content-type'), 'application/x-tar');
    assert.deepEqual(Buffer.from(await got.arrayBuffer()), small);
    const big = await tarOf({ 'big.bin': Buffer.alloc(20 * 1024 * 1024, 7) });
    const rb = await put('/data/big', big);
    assert.equal(rb.status, 200, await rb.clone().text());
    assert.equal((w.sc.commands('env.put').at(-1)!.payload as any).tar_b64, '');
    const gb = await fetch(`${w.t.url}/v1/envs/${w.alpha}/files?service=app&path=/data/big`, {
      headers: { authorization: `Bearer ${w.t.key}` },
    });
    assert.equal(gb.status, 200);
    assert.ok(Buffer.from(await gb.arrayBuffer()).equals(big));
  });

  test('files: 413 over 32 MiB, 400 for a non-tar body or a relative path, 502 for a missing path', async () => {
    assert.equal((await put('/data/x', Buffer.alloc(32 * 1024 * 1024 + 1))).status, 413);
    assert.equal((await put('/data/x', Buffer.from('not a tar at all, just text'))).status, 400);
    assert.equal((await put('data/x', await tarOf({ a: 'b' }))).status, 400);
    assert.equal((await put('/data/../etc', await tarOf({ a: 'b' }))).status, 400);
    const missing = await w.t.req('GET', `/v1/envs/${w.alpha}/files?service=app&path=/nope`);
    assert.equal(missing.status, 502);
    assert.match(missing.body.error, /no such file or directory/);
    assert.equal((await w.t.req('GET', `/v1/envs/${w.alpha}/files?service=app`)).status, 400);
  });

  test('files: devices and FIFOs are a 400, a sparse file expanding past 256 MiB a 413, before any host', async () => {
    const before = w.sc.commands('env.put').length;
    for (const type of ['character-device', 'block-device', 'fifo'] as const) {
      const p = tar.pack();
      p.entry({ name: 'node', type, devmajor: 1, devminor: 1 });
      p.finalize();
      const chunks: Buffer[] = [];
      for await (const c of p) chunks.push(c as Buffer);
      const r = await put('/data/x', Buffer.concat(chunks));
      assert.equal(r.status, 400, type);
      assert.match(
        ((await r.json()) as { error: string }).error,
        /upload refused: 'node': (device nodes|FIFOs) are not accepted/,
      );
    }
    // A PAX sparse entry (format 1.0) storing 512 bytes of a 1 GiB file.
    const p = tar.pack();
    const sparse = {
      'GNU.sparse.major': '1',
      'GNU.sparse.minor': '0',
      'GNU.sparse.name': 'hole',
      'GNU.sparse.realsize': String(1024 ** 3),
    };
    p.entry({ name: 'GNUSparseFile.0/hole', size: 512, pax: sparse } as tar.Header, Buffer.alloc(512));
    p.finalize();
    const chunks: Buffer[] = [];
    for await (const c of p) chunks.push(c as Buffer);
    const r = await put('/data/x', Buffer.concat(chunks));
    assert.equal(r.status, 413);
    assert.match(
      ((await r.json()) as { error: string }).error,
      /archive expands to 1073741824 bytes, over the 256 MiB limit/,
    );
    assert.equal(w.sc.commands('env.put').length, before, 'a refused upload reached the host');
  });
});
