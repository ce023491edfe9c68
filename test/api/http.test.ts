// The HTTP surface: sidecar downloads, events, error shapes and limits, the OpenAPI document.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { appendEvent } from '../../server/events/store.ts';
import { assertError, createProject, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

/** A raw request, so paths reach the server exactly as written (fetch normalises `..`). */
function rawGet(url: string, path: string): Promise<{ status: number; body: string; type: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: 'GET', path }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c) => {
        body += c;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body, type: String(res.headers['content-type']) }),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

forEachDialect('http surface', (dialect) => {
  let s: TestServer;
  let releases: string;
  const AMD = Buffer.from([0x7f, 0x45, 0x4c, 0x46, 1, 2, 3, 0, 255]);
  before(async () => {
    releases = mkdtempSync(join(tmpdir(), 'svc-rel-'));
    writeFileSync(join(releases, 'svcd-linux-amd64'), AMD);
    writeFileSync(join(releases, 'secret.txt'), 'do not serve me');
    s = await startTestServer(dialect, { SVC_RELEASES_DIR: releases, SVC_DEV_LOGIN: '1' });
  });
  after(async () => {
    await s.close();
    rmSync(releases, { recursive: true, force: true });
  });

  test('sidecar downloads: amd64 by default, arm64 by query or path, 404 when absent', async () => {
    for (const path of ['/svcd', '/svcd?arch=amd64', '/svcd?arch=x86_64', '/svcd-linux-amd64']) {
      const r = await fetch(`${s.url}${path}`);
      assert.equal(r.status, 200, path);
      assert.equal(r.headers.get('content-type'), 'application/octet-stream');
      assert.equal(r.headers.get('content-length'), String(AMD.length));
      assert.deepEqual(Buffer.from(await r.arrayBuffer()), AMD);
    }
    assertError(await s.req('GET', '/svcd?arch=arm64', { token: false }), 404, 'svcd-linux-arm64');
    assertError(await s.req('GET', '/svcd-linux-arm64', { token: false }), 404);
    writeFileSync(join(releases, 'svcd-linux-arm64'), 'arm');
    for (const path of ['/svcd?arch=arm64', '/svcd?arch=aarch64', '/svcd-linux-arm64']) {
      const r = await fetch(`${s.url}${path}`);
      assert.equal(await r.text(), 'arm', path);
    }
    const head = await fetch(`${s.url}/svcd`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(AMD.length));
    assertError(await s.req('GET', '/svcd?arch=mips', { token: false }), 400, 'amd64 or arm64');
  });

  test('CLI downloads: /svc-linux-amd64 and /svc-linux-arm64, 404 naming the build when absent', async () => {
    for (const arch of ['amd64', 'arm64']) {
      assertError(await s.req('GET', `/svc-linux-${arch}`, { token: false }), 404, `svc-linux-${arch}`);
      writeFileSync(join(releases, `svc-linux-${arch}`), `cli ${arch}`);
      const r = await fetch(`${s.url}/svc-linux-${arch}`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/octet-stream');
      assert.equal(await r.text(), `cli ${arch}`);
    }
  });

  test('GET /install.sh: the install script, no credential, valid sh that refuses unknown flags', async () => {
    const r = await fetch(`${s.url}/install.sh`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/x-shellscript/);
    const script = await r.text();
    assert.match(script, /^#!\/bin\/sh\n/);
    for (const flag of [
      '--server',
      '--releases',
      '--token',
      '--zfs-pool',
      '--data',
      'SVC_BIN_DIR',
      'svcd-linux-$arch',
    ])
      assert.ok(script.includes(flag), flag);
    const file = join(releases, 'install.sh');
    writeFileSync(file, script);
    assert.equal(spawnSync('sh', ['-n', file]).status, 0, 'parses');
    const bad = spawnSync('sh', [file, '--bogus'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /unknown argument '--bogus'[\s\S]*usage: install\.sh --server URL --token T/);
  });

  test('nothing else is ever served from the releases directory', async () => {
    for (const path of [
      '/svcd?arch=../secret.txt',
      '/svcd-linux-amd64/../secret.txt',
      '/svcd/../secret.txt',
      '/svcd-linux-..%2Fsecret.txt',
      '/secret.txt',
      '/svcd-linux-amd64%2F..%2Fsecret.txt',
      '/svcd-linux-secret.txt',
    ]) {
      const r = await rawGet(s.url, path);
      assert.ok(r.status === 400 || r.status === 404, `${path}: ${r.status}`);
      assert.ok(!r.body.includes('do not serve me'), path);
      assert.match(r.type, /json/, path);
    }
  });

  test('GET /v1/events: subject checked, newest first, team only, at most 200', async () => {
    const p = await createProject(s, 'evented');
    const env = p.environments[0].ID;
    const db = s.server.ctx.db;
    const other = await otherTeam(s, 'events-other@example.com');
    for (let i = 0; i < 205; i++)
      await appendEvent(db, p.project.TeamID, `env:${env}`, 'test.tick', { i }, null);
    await appendEvent(db, other.teamId, `env:${env}`, 'test.foreign', { secret: true }, null);
    await appendEvent(db, p.project.TeamID, 'dep:dep_x', 'deployment.started', { kind: 'deploy' }, null);
    const r = await s.req('GET', `/v1/events?subject=env:${env}`);
    assert.equal(r.status, 200);
    assert.equal(r.body.events.length, 200);
    assert.deepEqual(r.body.events[0].Body, { i: 204 });
    assert.deepEqual(r.body.events[199].Body, { i: 5 });
    assert.deepEqual(Object.keys(r.body.events[0]).sort(), ['At', 'Body', 'ID', 'Kind', 'Subject', 'TeamID']);
    assert.ok(r.body.events.every((e: { Kind: string }) => e.Kind === 'test.tick'));
    const dep = await s.req('GET', '/v1/events?subject=dep:dep_x');
    assert.deepEqual(
      dep.body.events.map((e: { Kind: string }) => e.Kind),
      ['deployment.started'],
    );
    const theirs = await s.req('GET', `/v1/events?subject=env:${env}`, { token: other.key });
    assert.deepEqual(
      theirs.body.events.map((e: { Kind: string }) => e.Kind),
      ['test.foreign'],
    );
    for (const subject of ['host:host_x', 'cmd:cmd_x']) {
      assert.deepEqual((await s.req('GET', `/v1/events?subject=${subject}`)).body, { events: [] });
    }
    for (const q of [
      '',
      '?subject=',
      '?subject=env:',
      '?subject=vm:x',
      '?subject=env:a%20b',
      '?subject=env',
    ]) {
      assertError(await s.req('GET', `/v1/events${q}`), 400, 'subject must be');
    }
    assertError(await s.req('GET', `/v1/events?subject=env:${env}`, { token: false }), 401);
  });

  test('errors: unknown routes 404, malformed JSON 400, wrong types 400, big bodies 413, all {error}', async () => {
    assertError(await s.req('GET', '/nope', { token: false }), 404, 'no route for GET /nope');
    assertError(await s.req('DELETE', '/v1/projects'), 404);
    assertError(await s.req('GET', '/v1/nope'), 404);
    const json = { 'content-type': 'application/json' };
    assertError(
      await s.req('POST', '/v1/projects', { raw: '{"name":', headers: json }),
      400,
      'malformed JSON',
    );
    assertError(await s.req('POST', '/v1/projects', { raw: '', headers: json }), 400);
    assertError(await s.req('POST', '/v1/projects', { raw: '[]', headers: json }), 400);
    assertError(
      await s.req('POST', '/v1/projects', { raw: 'name=x', headers: { 'content-type': 'text/plain' } }),
      400,
    );
    assertError(
      await s.req('POST', '/v1/projects', { raw: 'x', headers: { 'content-type': 'application/xml' } }),
      400,
    );
    assertError(await s.req('POST', '/v1/projects', { body: { name: 5 } }), 400, 'body.name');
    assertError(
      await s.req('POST', '/v1/projects', { raw: '{"__proto__":{"x":1},"name":"p"}', headers: json }),
      400,
    );
    const big = JSON.stringify({ name: 'big', source: 'x'.repeat(3 * 1024 * 1024) });
    assertError(await s.req('POST', '/v1/projects', { raw: big, headers: json }), 413, 'too large');
    assertError(await s.req('GET', `/v1/envs/${'e'.repeat(150)}`), 400, 'too long');
    const bad = await rawGet(s.url, '/v1/envs/%E0%A4%A');
    assert.equal(bad.status, 400);
    assert.deepEqual(JSON.parse(bad.body), { error: 'malformed URL' });
    assert.equal(
      (await s.req('GET', '/v1/projects')).body.projects.some((p: { Name: string }) => p.Name === 'big'),
      false,
    );
  });

  test('GET /openapi.json: OpenAPI 3.1 with every route, its schemas and security', async () => {
    const r = await s.req('GET', '/openapi.json', { token: false });
    assert.equal(r.status, 200);
    const doc = r.body;
    assert.equal(doc.openapi, '3.1.0');
    for (const path of [
      '/svcd',
      '/auth/dev-login',
      '/v1/me',
      '/v1/teams',
      '/v1/keys',
      '/v1/keys/{id}',
      '/v1/device/code',
      '/v1/device/approve',
      '/v1/device/token',
      '/v1/templates',
      '/v1/projects',
      '/v1/projects/{project}/envs',
      '/v1/projects/{project}/source',
      '/v1/projects/{project}/deploy-from-source',
      '/v1/envs/{env}',
      '/v1/envs/{env}/versions',
      '/v1/envs/{env}/deployments',
      '/v1/deployments/{dep}',
      '/v1/clouds',
      '/v1/join-tokens',
      '/v1/hosts',
      '/v1/targets',
      '/v1/events',
      '/v1/codehost/installations',
      '/webhooks/codehost',
    ]) {
      assert.ok(doc.paths[path], `${path} missing from the OpenAPI document`);
    }
    const create = doc.paths['/v1/projects'].post;
    const body = create.requestBody.content['application/json'].schema;
    assert.deepEqual(body.required, ['name']);
    assert.deepEqual(body.properties.kind.enum, ['rl-environment', 'agent']);
    assert.deepEqual(create.security, [{ bearer: [] }]);
    assert.equal(doc.paths['/v1/envs/{env}'].get.parameters[0].name, 'env');
    assert.ok(doc.paths['/v1/events'].get.parameters.some((p: { name: string }) => p.name === 'subject'));
    assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
    // Routes that take no body at all say so; the others still require theirs.
    assert.equal(doc.paths['/v1/join-tokens'].post.requestBody.required, false);
    assert.equal(doc.paths['/v1/device/code'].post.requestBody.required, false);
    assert.equal(doc.paths['/v1/projects'].post.requestBody.required, true);
  });
});
