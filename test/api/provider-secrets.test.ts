// Provider tokens at rest: sealed with AES-256-GCM, key from SVC_SECRETS_KEY or a 0600
// key file beside the embedded database; migration 4 seals rows written before it; masked in answers.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SecretBox } from '../../server/clouds/secret-box.ts';
import { parseConfig } from '../../server/config/config.ts';
import { migrate } from '../../server/db/migrate.ts';
import { connect, openDb } from '../../server/db/open.ts';
import { MIGRATIONS } from '../../server/db/schema.ts';
import { assertError, dumpDatabase } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';

const MASK = '\u2022\u2022\u2022';

forEachDialect('provider tokens at rest', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect);
  });
  after(() => s.close());

  test('tokens are sealed in the database, masked in answers, and open for drivers', async () => {
    const secrets = ['sa-token-plain-1', 'sb-token-plain-2', 'vm-token-plain-3'];
    const made = [
      await s.req('POST', '/v1/clouds', { body: { provider: 'sandbox-a', config: { token: secrets[0] } } }),
      await s.req('POST', '/v1/clouds', {
        body: { provider: 'sandbox-b', config: { token: secrets[1], api_url: 'http://127.0.0.1:9/api/' } },
      }),
      await s.req('POST', '/v1/clouds', { body: { provider: 'cloudvm', config: { token: secrets[2] } } }),
    ];
    for (const r of made) assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.deepEqual(made[1].body.cloud.Config, { token: MASK, api_url: 'http://127.0.0.1:9/api' });
    const dump = await dumpDatabase(s);
    for (const t of secrets) assert.ok(!dump.includes(t), `${t} stored in clear`);
    const rows = await s.server.ctx.db.all<{ config: string }>(
      'SELECT config FROM clouds ORDER BY created_at',
    );
    const opened = rows.map((r) => s.server.ctx.secrets.openConfig(JSON.parse(r.config)).token);
    assert.deepEqual(opened, secrets);
    const listed = JSON.stringify((await s.req('GET', '/v1/clouds')).body);
    for (const t of secrets) assert.ok(!listed.includes(t));
  });

  test('api_url and envd_url: http(s) base addresses; unknown keys stay a 400 naming the key', async () => {
    const cases: [object, string][] = [
      [{ provider: 'sandbox-a', name: 'x1', config: { token: 't', api_url: 'ftp://x' } }, 'config.api_url'],
      [
        { provider: 'sandbox-a', name: 'x2', config: { token: 't', envd_url: 'not a url' } },
        'config.envd_url',
      ],
      [{ provider: 'sandbox-b', name: 'x3', config: { token: 't', envd_url: 'http://x' } }, "'envd_url'"],
      [
        { provider: 'cloudvm', name: 'x4', config: { token: 't', api_url: 'http://u:p@x' } },
        'config.api_url',
      ],
      [
        { provider: 'cloudvm', name: 'x5', config: { token: 't', region: 'x' } },
        "unknown config key 'region'",
      ],
    ];
    for (const [body, phrase] of cases) assertError(await s.req('POST', '/v1/clouds', { body }), 400, phrase);
    const ok = await s.req('POST', '/v1/clouds', {
      body: {
        provider: 'sandbox-a',
        name: 'x6',
        config: { token: 't', api_url: 'https://api.example', envd_url: 'https://sandbox.example/' },
      },
    });
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body.cloud.Config, {
      token: MASK,
      api_url: 'https://api.example',
      envd_url: 'https://sandbox.example',
    });
  });
});

test('the key file is created 0600 beside the embedded database and reused; a bad SVC_SECRETS_KEY is refused', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-keyfile-'));
  try {
    const db = join(dir, 'svc.db');
    const a = SecretBox.load('', db);
    assert.equal(statSync(`${db}.key`).mode & 0o777, 0o600);
    const sealed = a.seal('hello');
    assert.equal(SecretBox.load('', db).open(sealed), 'hello', 'the same key file opens it after a restart');
    const other = SecretBox.load(randomBytes(32).toString('base64'), db);
    assert.throws(() => other.open(sealed), /secrets key changed/);
    assert.throws(() => parseConfig([], { SVC_SECRETS_KEY: 'short' }), /SVC_SECRETS_KEY: must be 32 bytes/);
    assert.throws(() => SecretBox.load('', 'postgres://x/y').seal('t'), /set SVC_SECRETS_KEY/);
    assert.ok(!existsSync('postgres:/x/y.key'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a Postgres control plane without SVC_SECRETS_KEY refuses to store a token with a 503 naming the variable', {
  skip: tier('postgres'),
}, async () => {
  const s = await startTestServer('postgres', { SVC_SECRETS_KEY: '' });
  try {
    assertError(
      await s.req('POST', '/v1/clouds', { body: { provider: 'sandbox-a', config: { token: 't' } } }),
      503,
      'set SVC_SECRETS_KEY',
    );
    assertError(
      await s.req('POST', '/v1/targets/connect', { body: { provider: 'sandbox-b', token: 't' } }),
      503,
      'set SVC_SECRETS_KEY',
    );
    assert.equal((await s.req('POST', '/v1/clouds', { body: { provider: 'manual' } })).status, 201);
  } finally {
    await s.close();
  }
});

test('migration 4 seals the tokens of clouds written before it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-mig4-'));
  try {
    const path = join(dir, 'svc.db');
    const old = connect(path);
    await migrate(
      old,
      MIGRATIONS.filter((m) => m.version < 4),
    );
    await old.run("INSERT INTO teams (id, name, created_at) VALUES ('team_1', 't', '2026-01-01')");
    await old.run(
      `INSERT INTO clouds (id, team_id, provider, name, config, created_at)
       VALUES ('cld_1', 'team_1', 'sandbox-a', 'sa', '{"token":"legacy-plain-token"}', '2026-01-01')`,
    );
    await old.close();
    const box = SecretBox.load('', path);
    const { db, steps } = await openDb(path, { sealConfig: (c) => box.sealConfig(c) });
    assert.equal(steps.find((x) => x.version === 4)?.status, 'applied');
    const row = await db.get<{ config: string }>("SELECT config FROM clouds WHERE id = 'cld_1'");
    assert.ok(!row?.config.includes('legacy-plain-token'));
    assert.equal(box.openConfig(JSON.parse(row?.config ?? '{}')).token, 'legacy-plain-token');
    await db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
