// Findings of the bad-input probe: a NUL in free text was a 500 on Postgres (now a 400 on every
// backend, changing nothing); cloud config keys named like Object.prototype members are refused;
// warm refuses NUL like compose values; one rule for unknown body fields (refused with 400 naming
// the field); expected 502/503 answers log one warn line.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { assertError, createProject, signIn } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { rowCounts } from './support/state.ts';

forEachDialect('bad input', (dialect) => {
  let s: TestServer;
  const lines: string[] = [];
  before(async () => {
    const stream = new Writable({
      write(chunk, _enc, done) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    s = await startTestServer(
      dialect,
      { SVC_DEV_LOGIN: '1' },
      {
        logger: { level: 'info', stream } as unknown as FastifyBaseLogger,
      },
    );
  });
  after(() => s.close());

  test('a NUL in any free text is a 400 and changes nothing', async () => {
    const who = await signIn(s, 'nul@example.com');
    const code = await s.req('POST', '/v1/device/code', { token: false });
    const before = await rowCounts(s);
    const cases: Array<[string, string, unknown, string | false | undefined]> = [
      ['POST', '/v1/teams', { name: 'team\0x' }, who.session],
      ['POST', '/v1/keys', { name: 'key\0x' }, undefined],
      ['POST', '/auth/dev-login', { email: 'a@example.com', name: 'dev\0login' }, false],
      ['POST', '/v1/projects', { name: 'p1', source: 'github:o/r\0' }, undefined],
      ['POST', '/v1/projects', { name: 'p2', kind: 'agent', source: '\0' }, undefined],
      [
        'POST',
        '/v1/device/approve',
        { user_code: code.body.user_code, team_id: who.teamId, name: 'cli\0' },
        who.session,
      ],
      ['POST', '/v1/device/token', { device_code: 'ddc_\0' }, false],
      ['POST', '/v1/join-tokens', { cloud_id: 'c\0' }, undefined],
    ];
    for (const [method, path, body, token] of cases) {
      const r = await s.req(method, path, { body, token });
      assertError(r, 400, 'contains a NUL character');
    }
    for (const path of ['/v1/projects/a%00b/envs', '/v1/envs/env_%00', '/v1/events?subject=env:%00']) {
      assertError(await s.req('GET', path), 400, 'NUL');
    }
    assert.deepEqual(await rowCounts(s), before);
  });

  test('warm refuses NUL like compose values', async () => {
    await createProject(s, 'warmnul');
    const r = await s.req('POST', '/v1/projects/warmnul/deploy', {
      body: { compose: 'services:\n  a:\n    image: redis\n', warm: ['sh', '-c', 'echo\0hi'] },
    });
    assertError(r, 400, 'body.warm[2] contains a NUL character');
  });

  test('config keys named like Object.prototype members are refused', async () => {
    for (const key of ['constructor', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf']) {
      const r = await s.req('POST', '/v1/clouds', {
        body: { provider: 'cloudvm', name: `c-${key}`, config: { token: 't', [key]: 'x' } },
      });
      assertError(r, 400, `unknown config key '${key}'`);
    }
  });

  test('unknown body fields are refused with 400 naming the field, on every route', async () => {
    const p = await createProject(s, 'strict');
    const env = p.environments[0].ID;
    const compose = 'services:\n  a:\n    image: redis\n';
    const cases: Array<[string, unknown]> = [
      ['/v1/projects/strict/deploy', { compose, bogus: 1 }],
      [`/v1/envs/${env}/fork`, { name: 'f', bogus: 1 }],
      [`/v1/envs/${env}/rollback`, { version: 'ver_x', bogus: 1 }],
      [`/v1/envs/${env}/verify`, { resume: true, bogus: 1 }],
      [`/v1/envs/${env}/exec`, { service: 'a', cmd: ['true'], bogus: 1 }],
      ['/v1/sandboxes', { image: 'redis', bogus: 1 }],
      ['/v1/projects', { name: 'x', bogus: 1 }],
    ];
    const before = await rowCounts(s);
    for (const [path, body] of cases)
      assertError(await s.req('POST', path, { body }), 400, "unknown field 'bogus'");
    assert.deepEqual(await rowCounts(s), before);
  });

  test('an expected 503 is logged as one warn line without a stack trace', async () => {
    const r = await s.req('GET', '/auth/codehost/start', { token: false });
    assert.equal(r.status, 503);
    const logged = lines
      .map((l) => JSON.parse(l))
      .filter((l) => l.msg === 'request refused' || l.msg === 'request failed');
    assert.ok(logged.length >= 1, 'the refusal was logged');
    for (const l of logged) {
      assert.equal(l.level, 40, JSON.stringify(l));
      assert.equal(l.status, 503);
      assert.equal(JSON.stringify(l).includes('"stack"'), false, 'no stack trace');
    }
  });
});
