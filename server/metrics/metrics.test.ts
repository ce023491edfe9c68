// GET /metrics: Prometheus text with HTTP latency by route template, command latency by kind,
// phase durations by deployment kind and hosts connected; only the operator's SVC_METRICS_TOKEN
// reads them (the figures are process-wide: every team's requests and pool versions).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { deploy, type World, waitFor, world } from '../../test/orchestrator/harness.ts';
import { sample } from '../../test/support/metrics.ts';
import { startTestServer } from '../../test/support/server.ts';

const TOKEN = 'metrics-operator-token-0123456789';
let w: World;
before(async () => {
  w = await world('sqlite', {}, 'p1', { SVC_METRICS_TOKEN: TOKEN });
});
after(async () => {
  await w.sc.close();
  await w.t.close();
});

/** GET /metrics as the operator. */
const scrape = () => w.t.req('GET', '/metrics', { token: TOKEN });

test('GET /metrics is for the operator: no credential 401, a team key or another token 403', async () => {
  assert.equal((await w.t.req('GET', '/metrics', { token: false })).status, 401);
  const team = await w.t.req('GET', '/metrics');
  assert.equal(team.status, 403, JSON.stringify(team.body));
  assert.match(team.body.error, /SVC_METRICS_TOKEN/);
  assert.equal((await w.t.req('GET', '/metrics', { token: `${TOKEN}x` })).status, 403);
  assert.equal((await scrape()).status, 200);
});

test('without SVC_METRICS_TOKEN there is no /metrics, whatever the credential', async () => {
  const t = await startTestServer('sqlite');
  try {
    assert.equal((await t.req('GET', '/metrics')).status, 404);
    assert.equal((await t.req('GET', '/metrics', { token: false })).status, 404);
  } finally {
    await t.close();
  }
});

test('after a deploy: hosts connected, command and phase histograms, HTTP latency by route template', async () => {
  const d = await deploy(w);
  await w.t.req('GET', `/v1/deployments/${d.deployment.ID}`);
  const r = await scrape();
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /text\/plain; version=0\.0\.4/);
  const text = r.body as string;
  assert.equal(sample(text, 'svc_hosts_connected'), 1);
  assert.ok(sample(text, 'svc_command_duration_seconds_count', { kind: 'env.create', outcome: 'ok' }) >= 1);
  for (const phase of d.phases.filter((p: any) => p.Status === 'ok' && p.Name !== 'verdict'))
    assert.ok(
      sample(text, 'svc_deployment_phase_duration_seconds_count', {
        kind: 'deploy',
        phase: phase.Name,
        status: 'ok',
      }) >= 1,
      `phase ${phase.Name} observed`,
    );
  // Paths with ids are reported by their route template, so labels stay bounded.
  assert.ok(
    sample(text, 'svc_http_request_duration_seconds_count', {
      method: 'GET',
      route: '/v1/deployments/:dep',
      status: '200',
    }) >= 1,
    text
      .split('\n')
      .filter((l) => l.includes('deployments'))
      .join('\n'),
  );
  assert.ok(!text.includes(d.deployment.ID), 'no ids in labels');
});

test('a failed command is counted by kind', async () => {
  w.sc.handlers['env.exec'] = () => {
    throw new Error('no such service');
  };
  const d = await deploy(w);
  const x = await w.t.req('POST', `/v1/envs/${d.deployment.EnvID}/exec`, {
    body: { service: 'app', cmd: ['true'] },
  });
  assert.notEqual(x.status, 200);
  const text = (await scrape()).body as string;
  assert.ok(sample(text, 'svc_commands_failed_total', { kind: 'env.exec' }) >= 1, text.slice(0, 500));
});

test('warm pools: members by state and claims by where they came from', async () => {
  const ver = (await deploy(w)).deployment.VersionID;
  await w.t.req('POST', `/v1/versions/${ver}/pool`, { body: { size: 2 } });
  const text = async () => (await scrape()).body as string;
  await waitFor(async () => sample(await text(), 'svc_pool_members', { version: ver, state: 'ready' }) === 2);
  assert.equal(sample(await text(), 'svc_pool_members', { version: ver, state: 'target' }), 2);
  const r = await w.t.req('POST', '/v1/sandboxes', { body: { from_version: ver } });
  assert.equal(r.status, 201);
  assert.ok(sample(await text(), 'svc_pool_claims_total', { from: 'pool' }) >= 1);
});
