// Templates, projects, environments (read), deployments (read) and project sources.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseCompose } from '../../server/compose/index.ts';
import { insertDeployment, updatePhase } from '../../server/deployments/store.ts';
import { insertVersion } from '../../server/envs/store.ts';
import { insertHost } from '../../server/hosts/store.ts';
import { assertError, createProject, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';

const ENV_FIELDS = [
  'CreatedAt',
  'CurrentVersionID',
  'Endpoints',
  'HostID',
  'ID',
  'Name',
  'ParentVersionID',
  'ProjectID',
  'Stage',
  'Status',
];

forEachDialect('project routes', (dialect) => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
  });
  after(() => s.close());

  test('GET /v1/templates: both kinds, two deployable templates, filter by kind', async () => {
    const r = await s.req('GET', '/v1/templates');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.kinds, ['rl-environment', 'agent']);
    assert.deepEqual(
      r.body.templates.map((t: { name: string; kind: string }) => [t.name, t.kind]),
      [
        ['rl-environment-ops', 'rl-environment'],
        ['agent-runtime', 'agent'],
      ],
    );
    for (const t of r.body.templates) {
      assert.equal(typeof t.description, 'string');
      assert.deepEqual(parseCompose(t.compose).warnings, []);
    }
    const ops = r.body.templates[0];
    assert.deepEqual(ops.requires, ['docker', 'compose']);
    assert.ok(Array.isArray(ops.warm));
    const agent = await s.req('GET', '/v1/templates?kind=agent');
    assert.deepEqual(
      agent.body.templates.map((t: { name: string }) => t.name),
      ['agent-runtime'],
    );
    assert.deepEqual(agent.body.kinds, ['rl-environment', 'agent']);
    assertError(await s.req('GET', '/v1/templates?kind=game'), 400, 'kind must be one of');
    assertError(await s.req('GET', '/v1/templates', { token: false }), 401);
  });

  test('POST /v1/projects creates the project and its alpha environment', async () => {
    const r = await s.req('POST', '/v1/projects', { body: { name: 'web-shop' } });
    assert.equal(r.status, 201);
    const { project, environments } = r.body;
    assert.deepEqual(Object.keys(project).sort(), ['CreatedAt', 'ID', 'Kind', 'Name', 'Source', 'TeamID']);
    assert.equal(project.Kind, 'rl-environment');
    assert.equal(project.Source, '');
    assert.equal(environments.length, 1);
    const alpha = environments[0];
    assert.deepEqual(Object.keys(alpha).sort(), ENV_FIELDS);
    assert.equal(alpha.Name, 'alpha');
    assert.equal(alpha.Stage, 'alpha');
    assert.equal(alpha.Status, 'empty');
    assert.equal(alpha.ProjectID, project.ID);
    assert.match(alpha.ID, /^env_/);
    assert.deepEqual(alpha.Endpoints, {});

    const agent = await createProject(s, 'helper.bot_2', { kind: 'agent' });
    assert.equal(agent.project.Kind, 'agent');
    const list = await s.req('GET', '/v1/projects');
    assert.deepEqual(
      list.body.projects
        .map((p: { Name: string }) => p.Name)
        .filter((n: string) => n === 'web-shop' || n === 'helper.bot_2'),
      ['web-shop', 'helper.bot_2'],
    );
  });

  test('POST /v1/projects refuses duplicates, bad names and bad kinds, and changes nothing', async () => {
    await createProject(s, 'dup');
    assertError(await s.req('POST', '/v1/projects', { body: { name: 'dup' } }), 409, "'dup' already exists");
    for (const name of ['', 'Upper', '-lead', 'a b', 'x'.repeat(64), 'prj_sneaky', 'é']) {
      assertError(await s.req('POST', '/v1/projects', { body: { name } }), 400);
    }
    assertError(
      await s.req('POST', '/v1/projects', { body: { name: 'k', kind: 'game' } }),
      400,
      'rl-environment, agent',
    );
    assertError(await s.req('POST', '/v1/projects', { body: {} }), 400, 'body.name is required');
    assertError(
      await s.req('POST', '/v1/projects', { body: { name: 'k', extra: 1 } }),
      400,
      "unknown field 'extra'",
    );
    assertError(await s.req('POST', '/v1/projects', { body: { name: 'k', source: 'x'.repeat(501) } }), 400);
    const list = await s.req('GET', '/v1/projects');
    assert.ok(!list.body.projects.some((p: { Name: string }) => p.Name === 'k'));
  });

  test('concurrent creates of one name: one 201, the rest 409, one alpha', async () => {
    const rs = await Promise.all(
      Array.from({ length: 5 }, () => s.req('POST', '/v1/projects', { body: { name: 'racy' } })),
    );
    assert.deepEqual(rs.map((r) => r.status).sort(), [201, 409, 409, 409, 409]);
    const envs = await s.req('GET', '/v1/projects/racy/envs');
    assert.equal(envs.body.environments.length, 1);
  });

  test('another team can use the same project name; names and ids stay team-scoped', async () => {
    const other = await otherTeam(s, 'projects-other@example.com');
    const mine = await createProject(s, 'shared-name');
    const theirs = await createProject(s, 'shared-name', {}, other.key);
    assert.notEqual(theirs.project.ID, mine.project.ID);
    assertError(await s.req('GET', `/v1/projects/${theirs.project.ID}/envs`), 404);
    const envs = await s.req('GET', '/v1/projects/shared-name/envs', { token: other.key });
    assert.equal(envs.body.environments[0].ID, theirs.environments[0].ID);
  });

  test('GET /v1/projects/{project}/envs by name or id', async () => {
    const p = await createProject(s, 'addressed');
    for (const ref of ['addressed', p.project.ID]) {
      const r = await s.req('GET', `/v1/projects/${ref}/envs`);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body.environments, p.environments);
    }
    assertError(await s.req('GET', '/v1/projects/nope/envs'), 404, "project 'nope' not found");
  });

  test('GET /v1/envs/{env}: the environment and connected, for no host, a sidecar and a driver', async () => {
    const p = await createProject(s, 'envs-read');
    const env = p.environments[0];
    const r = await s.req('GET', `/v1/envs/${env.ID}`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { environment: env, connected: false });

    const db = s.server.ctx.db;
    const teamId = p.project.TeamID;
    const sidecar = await insertHost(db, { teamId, name: 'box', status: 'connected' });
    await db.run('UPDATE environments SET host_id = ? WHERE id = ?', [sidecar.ID, env.ID]);
    assert.equal((await s.req('GET', `/v1/envs/${env.ID}`)).body.connected, false, 'no stream open');
    const hub = s.server.ctx.hub;
    s.server.ctx.hub = { isConnected: (id: string) => id === sidecar.ID };
    try {
      assert.equal((await s.req('GET', `/v1/envs/${env.ID}`)).body.connected, true, 'stream open');
    } finally {
      s.server.ctx.hub = hub;
    }
    const driver = await insertHost(db, {
      teamId,
      name: 'sandbox-a',
      status: 'connected',
      kind: 'driver:sandbox-a',
    });
    await db.run('UPDATE environments SET host_id = ? WHERE id = ?', [driver.ID, env.ID]);
    assert.equal(
      (await s.req('GET', `/v1/envs/${env.ID}`)).body.connected,
      true,
      'driver hosts are always connected',
    );

    assertError(await s.req('GET', '/v1/envs/env_nope'), 404, 'env_nope');
    assertError(await s.req('GET', `/v1/envs/${'x'.repeat(200)}`), 400);
  });

  test('GET /v1/envs/{env}/versions and /deployments, GET /v1/deployments/{dep}', async () => {
    const p = await createProject(s, 'history');
    const env = p.environments[0];
    const db = s.server.ctx.db;
    const spec = parseCompose('services:\n  app:\n    image: debian:bookworm-slim\n').spec;
    const v1 = await insertVersion(db, {
      projectId: p.project.ID,
      envId: env.ID,
      spec,
      snapshot: 'ver-a',
      healthy: true,
    });
    const v2 = await insertVersion(db, { projectId: p.project.ID, envId: env.ID, spec });
    const first = await insertDeployment(db, {
      teamId: p.project.TeamID,
      projectId: p.project.ID,
      envId: env.ID,
      kind: 'deploy',
      versionId: v1.ID,
      phases: ['resolve', 'verdict'],
    });
    await updatePhase(db, first.deployment.ID, 1, { status: 'ok', evidence: { version: v1.ID, number: 1 } });
    const second = await insertDeployment(db, {
      teamId: p.project.TeamID,
      projectId: p.project.ID,
      envId: env.ID,
      kind: 'snapshot',
      phases: ['snapshot', 'health', 'verdict'],
    });

    const versions = await s.req('GET', `/v1/envs/${env.ID}/versions`);
    assert.equal(versions.status, 200);
    assert.deepEqual(
      versions.body.versions.map((v: { ID: string; Number: number; Healthy: boolean }) => [
        v.ID,
        v.Number,
        v.Healthy,
      ]),
      [
        [v1.ID, 1, true],
        [v2.ID, 2, false],
      ],
    );
    assert.deepEqual(Object.keys(versions.body.versions[0]).sort(), [
      'CreatedAt',
      'EnvID',
      'Healthy',
      'ID',
      'Number',
      'ProjectID',
      'Snapshot',
      'Spec',
    ]);
    assert.equal(versions.body.versions[0].Spec.services[0].image, 'debian:bookworm-slim');

    const deps = await s.req('GET', `/v1/envs/${env.ID}/deployments`);
    assert.deepEqual(
      deps.body.deployments.map((d: { ID: string }) => d.ID),
      [second.deployment.ID, first.deployment.ID],
      'newest first',
    );

    const one = await s.req('GET', `/v1/deployments/${first.deployment.ID}`);
    assert.equal(one.status, 200);
    assert.equal(one.body.deployment.Kind, 'deploy');
    assert.deepEqual(
      one.body.phases.map((ph: { Seq: number; Name: string; Status: string }) => [
        ph.Seq,
        ph.Name,
        ph.Status,
      ]),
      [
        [1, 'resolve', 'ok'],
        [2, 'verdict', 'pending'],
      ],
    );
    assert.deepEqual(one.body.phases[0].Evidence, { version: v1.ID, number: 1 });

    const other = await otherTeam(s, 'history-other@example.com');
    assertError(await s.req('GET', `/v1/deployments/${first.deployment.ID}`, { token: other.key }), 404);
    assertError(await s.req('GET', `/v1/envs/${env.ID}/versions`, { token: other.key }), 404);
    assertError(await s.req('GET', `/v1/envs/${env.ID}/deployments`, { token: other.key }), 404);
    assertError(await s.req('GET', '/v1/deployments/dep_nope'), 404, 'dep_nope');
    assertError(await s.req('GET', '/v1/envs/env_nope/versions'), 404);
    assertError(await s.req('GET', '/v1/envs/env_nope/deployments'), 404);
  });
});
