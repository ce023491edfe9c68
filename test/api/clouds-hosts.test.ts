// Clouds, join tokens, hosts and targets.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { CAPABILITY_TABLE } from '../../server/clouds/providers.ts';
import { getCloud, insertCloud } from '../../server/clouds/store.ts';
import { consumeJoinToken, JOIN_EXPIRED, JOIN_UNKNOWN, JOIN_USED } from '../../server/hosts/join-tokens.ts';
import { insertHost } from '../../server/hosts/store.ts';
import { ensureDriverHosts } from '../../server/hosts/targets.ts';
import { assertError, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const MASK = '\u2022\u2022\u2022';
const HOST_FIELDS = [
  'Capabilities',
  'CloudID',
  'CreatedAt',
  'ID',
  'LastSeenAt',
  'Name',
  'ProviderRef',
  'Status',
  'TeamID',
  'connected',
];

forEachDialect('clouds', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  const connect = (body: object, token?: string) =>
    s.req('POST', '/v1/clouds', { body, ...(token ? { token } : {}) });

  test('cloudvm: token required, defaults filled, token masked and sealed at rest', async () => {
    const r = await connect({ provider: 'cloudvm', config: { token: 'vm-secret-1', location: 'fsn1' } });
    assert.equal(r.status, 201);
    const c = r.body.cloud;
    assert.deepEqual(Object.keys(c).sort(), ['Config', 'CreatedAt', 'ID', 'Name', 'Provider', 'TeamID']);
    assert.equal(c.Name, 'cloudvm');
    assert.deepEqual(c.Config, {
      token: MASK,
      server_type: 'cpx31',
      location: 'fsn1',
      image: 'ubuntu-24.04',
    });
    const stored = await getCloud(s.server.ctx.db, c.TeamID, c.ID);
    assert.match(String(stored?.Config.token), /^enc:v1:/, 'sealed at rest');
    assert.equal(
      s.server.ctx.secrets.openConfig(stored?.Config ?? {}).token,
      'vm-secret-1',
      'drivers open it',
    );
    const list = await s.req('GET', '/v1/clouds');
    assert.ok(!JSON.stringify(list.body).includes('vm-secret-1'));
  });

  test('config refusals are 400 with the reason, and record nothing', async () => {
    const cases: [object, string][] = [
      [{ provider: 'cloudvm', name: 'vm2' }, 'config.token is required'],
      [{ provider: 'cloudvm', name: 'vm2', config: { token: '' } }, 'config.token is required'],
      [{ provider: 'cloudvm', name: 'vm2', config: { token: 't', size: 'xl' } }, "unknown config key 'size'"],
      [{ provider: 'cloudvm', name: 'vm2', config: { token: 5 } }, 'config.token must be a string'],
      [{ provider: 'cloudvm', name: 'vm2', config: { token: 'a\nb' } }, 'one line'],
      [{ provider: 'sandbox-a', name: 'sa2' }, 'sandbox-a: config.token is required'],
      [
        { provider: 'sandbox-b', name: 'sb2', config: { token: 't', location: 'x' } },
        "unknown config key 'location'",
      ],
      [{ provider: 'manual', name: 'm2', config: { token: 't' } }, 'manual: takes no config'],
      [{ provider: 'aws' }, 'body.provider must be one of manual, cloudvm, sandbox-a, sandbox-b'],
      [{}, 'body.provider is required'],
      [{ provider: 'manual', name: 'bad name!' }, "cloud name 'bad name!'"],
      [{ provider: 'manual', config: 'x' }, 'body.config'],
    ];
    for (const [body, phrase] of cases) assertError(await connect(body), 400, phrase);
    const names = (await s.req('GET', '/v1/clouds')).body.clouds.map((c: { Name: string }) => c.Name);
    for (const n of ['vm2', 'sa2', 'sb2', 'm2']) assert.ok(!names.includes(n));
  });

  test('manual and sandbox clouds; names default to the provider and are unique per team', async () => {
    const manual = await connect({ provider: 'manual' });
    assert.equal(manual.status, 201);
    assert.deepEqual(manual.body.cloud.Config, {});
    assert.equal(manual.body.cloud.Name, 'manual');
    assertError(await connect({ provider: 'manual' }), 409, "a cloud named 'manual' already exists");
    const named = await connect({ provider: 'manual', name: 'rack-2', config: {} });
    assert.equal(named.status, 201);
    const sb = await connect({ provider: 'sandbox-b', config: { token: 'sb-token' } });
    assert.deepEqual(sb.body.cloud.Config, { token: MASK });
    const other = await otherTeam(s, 'clouds-other@example.com');
    assert.equal((await connect({ provider: 'manual' }, other.key)).status, 201, 'names are per team');
    const theirs = await s.req('GET', '/v1/clouds', { token: other.key });
    assert.deepEqual(
      theirs.body.clouds.map((c: { Name: string }) => c.Name),
      ['manual'],
    );
  });

  test('listings mask token and any key naming a secret or key', async () => {
    const other = await otherTeam(s, 'mask@example.com');
    await insertCloud(s.server.ctx.db, {
      teamId: other.teamId,
      provider: 'cloudvm',
      name: 'legacy',
      config: { token: 't1', api_key: 'k1', client_Secret: 's1', keyring: 'r1', region: 'eu' },
    });
    const list = await s.req('GET', '/v1/clouds', { token: other.key });
    assert.deepEqual(list.body.clouds[0].Config, {
      token: MASK,
      api_key: MASK,
      client_Secret: MASK,
      keyring: MASK,
      region: 'eu',
    });
  });
});

forEachDialect('join tokens, hosts and targets', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  test('POST /v1/join-tokens: a djt_ token, one hour, and an install line for this server', async () => {
    const r = await s.req('POST', '/v1/join-tokens');
    assert.equal(r.status, 201);
    assert.match(r.body.token, /^djt_[A-Za-z0-9_-]{43}$/);
    assert.equal(r.body.expires_in_sec, 3600);
    assert.equal(
      r.body.command,
      `curl -fsSL ${s.url}/install.sh | sudo sh -s -- --server ${s.url} --token ${r.body.token}`,
    );
    assert.equal((await s.req('POST', '/v1/join-tokens', { body: {} })).status, 201);
  });

  test('join tokens: cloud_id must be a manual or cloudvm cloud of the team', async () => {
    const vm = await s.req('POST', '/v1/clouds', { body: { provider: 'cloudvm', config: { token: 't' } } });
    const sa = await s.req('POST', '/v1/clouds', { body: { provider: 'sandbox-a', config: { token: 't' } } });
    const r = await s.req('POST', '/v1/join-tokens', { body: { cloud_id: vm.body.cloud.ID } });
    assert.equal(r.status, 201);
    const joined = await consumeJoinToken(s.server.ctx.db, r.body.token);
    assert.deepEqual(joined, { teamId: vm.body.cloud.TeamID, cloudId: vm.body.cloud.ID });
    assertError(
      await s.req('POST', '/v1/join-tokens', { body: { cloud_id: sa.body.cloud.ID } }),
      400,
      'sandbox-a',
    );
    assertError(await s.req('POST', '/v1/join-tokens', { body: { cloud_id: 'cld_nope' } }), 404, 'cld_nope');
    const other = await otherTeam(s, 'jt-other@example.com');
    assertError(
      await s.req('POST', '/v1/join-tokens', { token: other.key, body: { cloud_id: vm.body.cloud.ID } }),
      404,
    );
    assertError(
      await s.req('POST', '/v1/join-tokens', { body: { cloud: 'x' } }),
      400,
      "unknown field 'cloud'",
    );
  });

  test('consumeJoinToken: once, then used; expired; unknown', async () => {
    const db = s.server.ctx.db;
    const { token } = (await s.req('POST', '/v1/join-tokens')).body;
    const results = await Promise.all([
      consumeJoinToken(db, token, 'host_a'),
      consumeJoinToken(db, token, 'host_b'),
    ]);
    const wins = results.filter((r) => typeof r === 'object');
    assert.equal(wins.length, 1, 'exactly one consumer wins');
    assert.ok(results.includes(JOIN_USED));
    assert.equal(await consumeJoinToken(db, token), JOIN_USED);
    assert.equal(JOIN_USED, 'join: join token already used');

    const late = (await s.req('POST', '/v1/join-tokens')).body.token;
    await db.run('UPDATE join_tokens SET expires_at = ? WHERE used_at IS NULL', [
      new Date(Date.now() - 1).toISOString(),
    ]);
    assert.equal(await consumeJoinToken(db, late), JOIN_EXPIRED);
    assert.equal(JOIN_EXPIRED, 'join: join token expired');
    assert.equal(await consumeJoinToken(db, 'djt_unknown'), JOIN_UNKNOWN);
    assert.equal(await consumeJoinToken(db, 'dhs_wrong-kind'), JOIN_UNKNOWN);
  });

  test('hosts and targets: sidecars first, driver hosts on demand with their capability row', async () => {
    const u = await otherTeam(s, 'targets@example.com');
    const db = s.server.ctx.db;
    const vm = await s.req('POST', '/v1/clouds', {
      token: u.key,
      body: { provider: 'cloudvm', config: { token: 't' } },
    });
    const caps = { hostname: 'box', storage: 'dir', docker: '27.0', compose: true };
    const manual = await insertHost(db, {
      teamId: u.teamId,
      name: 'box',
      status: 'connected',
      capabilities: caps,
    });
    const fromVm = await insertHost(db, {
      teamId: u.teamId,
      name: 'vm-1',
      status: 'unreachable',
      cloudId: vm.body.cloud.ID,
    });
    const sa = await s.req('POST', '/v1/clouds', {
      token: u.key,
      body: { provider: 'sandbox-a', config: { token: 't' } },
    });
    const sb = await s.req('POST', '/v1/clouds', {
      token: u.key,
      body: { provider: 'sandbox-b', name: 'sbx', config: { token: 't' } },
    });

    const hub = s.server.ctx.hub;
    s.server.ctx.hub = { isConnected: (id: string) => id === manual.ID };
    try {
      const targets = (await s.req('GET', '/v1/targets', { token: u.key })).body.targets;
      assert.deepEqual(
        targets.map((t: { Name: string; kind: string; connected: boolean }) => [t.Name, t.kind, t.connected]),
        [
          ['box', 'sidecar', true],
          ['vm-1', 'sidecar', false],
          ['sandbox-a', 'driver:sandbox-a', true],
          ['sandbox-b', 'driver:sandbox-b', true],
        ],
      );
      const [box, vm1, a, b] = targets;
      assert.equal(box.provider, undefined);
      assert.equal(box.table, undefined);
      assert.deepEqual(box.capabilities, caps);
      assert.equal(vm1.provider, 'cloudvm');
      assert.equal(a.provider, 'sandbox-a');
      assert.equal(a.Status, 'connected');
      assert.equal(a.CloudID, sa.body.cloud.ID);
      assert.deepEqual(a.table, CAPABILITY_TABLE['sandbox-a']);
      assert.deepEqual(b.table, CAPABILITY_TABLE['sandbox-b']);
      assert.equal(b.CloudID, sb.body.cloud.ID);
      assert.equal(a.capabilities.provider, 'sandbox-a');
      for (const t of targets) for (const f of HOST_FIELDS) assert.ok(f in t, `${f} missing from target`);

      const hosts = (await s.req('GET', '/v1/hosts', { token: u.key })).body.hosts;
      assert.equal(hosts.length, 4);
      for (const h of hosts) assert.deepEqual(Object.keys(h).sort(), HOST_FIELDS);
      assert.deepEqual(
        hosts.map((h: { connected: boolean }) => h.connected),
        [true, false, true, true],
      );
    } finally {
      s.server.ctx.hub = hub;
    }

    // Listing again, or racing placement, never makes a second driver host for a cloud.
    await Promise.all([
      ensureDriverHosts(db, u.teamId),
      ensureDriverHosts(db, u.teamId),
      s.req('GET', '/v1/targets', { token: u.key }),
    ]);
    assert.equal((await s.req('GET', '/v1/targets', { token: u.key })).body.targets.length, 4);
    // Other teams see none of it.
    for (const path of ['/v1/hosts', '/v1/targets']) {
      const seen = JSON.stringify((await s.req('GET', path)).body);
      assert.ok(!seen.includes(u.teamId), `${path} shows another team's hosts`);
    }
    assert.equal(fromVm.CloudID, vm.body.cloud.ID);
  });
});
