import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { forEachDialect } from '../support/server.ts';
import {
  deploy,
  env,
  evidenceKeys,
  finished,
  phaseTable,
  SIMPLE_COMPOSE,
  type World,
  world,
} from './harness.ts';

const DEPLOY_PHASES = [
  'resolve',
  'place',
  'provision',
  'join',
  'prepare',
  'start',
  'health',
  'warm',
  'snapshot',
  'ingress',
  'verdict',
];

forEachDialect('deploy kind', (dialect) => {
  let w: World;
  before(async () => {
    w = await world(dialect);
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  test('a deploy runs every phase in order with the spec evidence and makes a healthy current version', async () => {
    const r = await w.t.req('POST', `/v1/projects/p1/deploy`, {
      body: { compose: SIMPLE_COMPOSE, warm: ['sh', '-c', 'echo warm'] },
    });
    assert.equal(r.status, 202);
    assert.equal(r.body.deployment.Kind, 'deploy');
    assert.equal(r.body.deployment.EnvID, w.alpha);
    assert.deepEqual(
      r.body.phases.map((p: any) => p.Name),
      DEPLOY_PHASES,
    );
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.equal(deployment.Error, '');
    assert.deepEqual(phaseTable(phases), [
      ['resolve', 'ok'],
      ['place', 'ok'],
      ['provision', 'skipped'],
      ['join', 'skipped'],
      ['prepare', 'ok'],
      ['start', 'ok'],
      ['health', 'ok'],
      ['warm', 'ok'],
      ['snapshot', 'ok'],
      ['ingress', 'skipped'],
      ['verdict', 'ok'],
    ]);
    assert.deepEqual(evidenceKeys(phases, 'resolve'), ['number', 'services', 'version', 'volumes']);
    assert.deepEqual(phases[1].Evidence, { host: w.sc.hostId, reason: 'first connected host in team' });
    assert.deepEqual(evidenceKeys(phases, 'prepare'), [
      'disk_mb',
      'disk_quota',
      'endpoints',
      'runtime',
      'version',
    ]);
    assert.equal(phases[4].Evidence.disk_mb, 10_240);
    assert.deepEqual(evidenceKeys(phases, 'start'), ['started_in_ms']);
    assert.deepEqual(evidenceKeys(phases, 'health'), ['endpoints']);
    assert.deepEqual(phases[7].Evidence, { exit: 0 });
    assert.deepEqual(evidenceKeys(phases, 'snapshot'), ['consistent', 'datasets', 'frozen_for', 'snapshot']);
    assert.deepEqual(phases[9].Evidence, { endpoints: {}, names: 'pending ingress proxy' });
    assert.deepEqual(evidenceKeys(phases, 'verdict'), ['snapshot', 'took_ms', 'version']);
    // The commands the sidecar saw, in order, with the spec's payloads.
    const create = w.sc.commands('env.create').at(-1)!;
    assert.equal(create.env_id, w.alpha);
    assert.deepEqual(Object.keys(create.payload as object).sort(), [
      'agent',
      'disk_mb',
      'egress',
      'from_snapshot',
      'services',
      'version',
      'volumes',
      'warm',
    ]);
    const warm = w.sc.commands('env.exec').at(-1)!;
    assert.deepEqual(warm.payload, { service: 'app', cmd: ['sh', '-c', 'echo warm'], timeout_sec: 600 });
    const snap = w.sc.commands('env.snapshot').at(-1)!;
    assert.deepEqual(snap.payload, { name: deployment.VersionID });
    const e = await env(w.t, w.alpha);
    assert.equal(e.CurrentVersionID, deployment.VersionID);
    assert.equal(e.HostID, w.sc.hostId);
    assert.equal(e.Status, 'running');
    const versions = (await w.t.req('GET', `/v1/envs/${w.alpha}/versions`)).body.versions;
    const v = versions.find((x: any) => x.ID === deployment.VersionID);
    assert.equal(v.Healthy, true);
    assert.equal(v.Snapshot, deployment.VersionID);
    assert.deepEqual(
      v.Spec.services.map((s: any) => s.name),
      ['app', 'db'],
    );
    const ev = await w.t.req('GET', `/v1/events?subject=dep:${deployment.ID}`);
    assert.deepEqual(
      ev.body.events.map((x: any) => x.Kind),
      ['deployment.finished', 'deployment.started'],
    );
    assert.equal(ev.body.events[0].Body.status, 'succeeded');
    const envEv = await w.t.req('GET', `/v1/events?subject=env:${w.alpha}`);
    assert.ok(
      envEv.body.events.some((x: any) => x.Kind === 'deployment.started' && x.Body.kind === 'deploy'),
    );
  });

  test('a refused compose file is a 400 with the reason and starts nothing', async () => {
    const before = (await w.t.req('GET', `/v1/envs/${w.alpha}/deployments`)).body.deployments.length;
    const r = await w.t.req('POST', '/v1/projects/p1/deploy', {
      body: { compose: 'services:\n  a:\n    image: x\n    privileged: true\n' },
    });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /^compose: .*privileged/);
    const agent = await w.t.req('POST', '/v1/projects/p1/deploy', {
      body: { compose: 'services:\n  main:\n    image: x\nx-svc.agent.service: main\n' },
    });
    assert.equal(agent.status, 400);
    assert.equal(
      agent.body.error,
      "compose: x-svc.agent.service 'main' must set a non-root user (user: '<uid>:<gid>'); the agent is never root",
    );
    assert.equal((await w.t.req('GET', `/v1/envs/${w.alpha}/deployments`)).body.deployments.length, before);
    assert.equal(
      (await w.t.req('POST', '/v1/projects/nope/deploy', { body: { compose: SIMPLE_COMPOSE } })).status,
      404,
    );
    assert.equal((await w.t.req('POST', '/v1/projects/p1/deploy', { body: { compose: 1 } })).status, 400);
  });

  test('a failed deploy with a previous healthy version rolls back to it', async () => {
    const first = await deploy(w);
    assert.equal(first.deployment.Status, 'succeeded');
    const prev = first.deployment.VersionID;
    w.sc.handlers['env.create'] = () => {
      throw new Error('image busybox:nope not found');
    };
    const { deployment, phases } = await deploy(w, SIMPLE_COMPOSE.replace('busybox:latest', 'busybox:nope'));
    delete w.sc.handlers['env.create'];
    assert.equal(deployment.Status, 'rolled_back');
    assert.equal(deployment.Error, 'prepare: image busybox:nope not found');
    const byName = Object.fromEntries(phases.map((p: any) => [p.Name, p]));
    assert.equal(byName.prepare.Status, 'failed');
    assert.equal(byName.prepare.Error, 'image busybox:nope not found');
    for (const n of ['start', 'health', 'warm', 'snapshot', 'ingress'])
      assert.equal(byName[n].Status, 'skipped', n);
    assert.equal(byName.verdict.Status, 'ok');
    assert.deepEqual(byName.verdict.Evidence, { reverted_to: prev });
    assert.deepEqual(w.sc.commands('env.rollback').at(-1)!.payload, { snapshot: prev });
    const e = await env(w.t, w.alpha);
    assert.equal(e.CurrentVersionID, prev);
    assert.equal(e.Status, 'running');
  });

  test('when that rollback fails too, the deploy is failed and says why', async () => {
    w.sc.handlers['env.create'] = () => {
      throw new Error('boom');
    };
    w.sc.handlers['env.rollback'] = () => {
      throw new Error('disk full');
    };
    const { deployment, phases } = await deploy(w);
    delete w.sc.handlers['env.create'];
    delete w.sc.handlers['env.rollback'];
    assert.equal(deployment.Status, 'failed');
    assert.equal(phases.at(-1).Evidence.reverted, 'rollback failed: disk full');
    assert.equal((await env(w.t, w.alpha)).Status, 'failed');
  });

  test('a non-zero warm command fails the warm phase with its exit and stderr', async () => {
    w.sc.handlers['env.exec'] = () => ({ exit_code: 3, stdout: '', stderr: 'seed failed' });
    const { deployment, phases } = await deploy(w, SIMPLE_COMPOSE, { warm: ['false'] });
    delete w.sc.handlers['env.exec'];
    const warm = phases.find((p: any) => p.Name === 'warm');
    assert.equal(warm.Status, 'failed');
    assert.deepEqual(warm.Evidence, { exit: 3, stderr: 'seed failed' });
    assert.equal(deployment.Error, 'warm: warm command exited 3');
    assert.equal(phases.find((p: any) => p.Name === 'snapshot').Status, 'skipped');
    assert.equal(deployment.Status, 'rolled_back');
  });
});
