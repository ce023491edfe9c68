import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { bareRequest } from '../support/api.ts';
import { forEachDialect } from '../support/server.ts';
import {
  AGENT_COMPOSE,
  deploy,
  env,
  evidenceKeys,
  finished,
  phaseTable,
  type World,
  world,
} from './harness.ts';

forEachDialect('fork, snapshot, rollback, verify, destroy', (dialect) => {
  let w: World;
  let v1: string;
  before(async () => {
    w = await world(dialect);
    v1 = (await deploy(w, AGENT_COMPOSE)).deployment.VersionID;
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  test('fork: a new environment with stage fork on the source host, from the current version', async () => {
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: {} });
    assert.equal(r.status, 202);
    assert.deepEqual(
      r.body.phases.map((p: any) => p.Name),
      ['place', 'clone', 'health', 'verdict'],
    );
    const forkId = r.body.deployment.EnvID;
    assert.notEqual(forkId, w.alpha);
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.deepEqual(phases[0].Evidence, { host: w.sc.hostId, reason: 'same host as source snapshot' });
    assert.deepEqual(evidenceKeys(phases, 'clone'), ['forked_in_ms', 'from']);
    assert.deepEqual(evidenceKeys(phases, 'health'), ['endpoints']);
    assert.deepEqual(evidenceKeys(phases, 'verdict'), ['env', 'took_ms']);
    const cmd = w.sc.commands('env.fork').at(-1)!;
    assert.equal(cmd.env_id, forkId);
    assert.deepEqual(Object.keys(cmd.payload as object).sort(), [
      'agent',
      'disk_mb',
      'egress',
      'from_env',
      'from_snapshot',
      'services',
      'volumes',
    ]);
    assert.equal((cmd.payload as any).from_env, w.alpha);
    assert.equal((cmd.payload as any).from_snapshot, v1);
    const f = await env(w.t, forkId);
    assert.equal(f.Stage, 'fork');
    assert.equal(f.Name, 'alpha-fork-1');
    assert.equal(f.ParentVersionID, v1);
    assert.equal(f.CurrentVersionID, v1);
    assert.equal(f.HostID, w.sc.hostId);
    assert.equal(f.Status, 'running');
    // A fork of the fork clones the same snapshot, from the env that holds it.
    const ff = await w.t.req('POST', `/v1/envs/${forkId}/fork`, { body: { name: 'grandchild' } });
    assert.equal((await finished(w.t, ff.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.equal((w.sc.commands('env.fork').at(-1)!.payload as any).from_env, w.alpha);
    const dup = await w.t.req('POST', `/v1/envs/${forkId}/fork`, { body: { name: 'grandchild' } });
    assert.equal(dup.status, 409);
  });

  test('fork refuses versions that are not healthy snapshots of this environment', async () => {
    const other = await w.t.req('POST', '/v1/projects', { body: { name: `other-${dialect}` } });
    const r = await w.t.req('POST', `/v1/envs/${other.body.environments[0].ID}/fork`, { body: {} });
    assert.equal(r.status, 409);
    const bad = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { version: 'ver_nope' } });
    assert.equal(bad.status, 400);
    assert.equal((await w.t.req('POST', '/v1/envs/env_nope/fork', { body: {} })).status, 404);
  });

  test('fork and verify with no body at all work like an empty object', async () => {
    // fetch sends `content-length: 0`; a bare request (curl -X POST) sends no length at all;
    // many clients send a JSON content type with an empty body.
    for (const send of [
      (path: string) => w.t.req('POST', path),
      (path: string) => bareRequest(w.t.url, path, w.t.key),
      (path: string) => w.t.req('POST', path, { raw: '', headers: { 'content-type': 'application/json' } }),
    ]) {
      for (const op of ['fork', 'verify']) {
        const r = await send(`/v1/envs/${w.alpha}/${op}`);
        assert.equal(r.status, 202, `${op}: ${JSON.stringify(r.body)}`);
        const { deployment } = await finished(w.t, r.body.deployment.ID);
        assert.equal(deployment.Status, 'succeeded', deployment.Error);
      }
    }
  });

  test('snapshot: a new healthy current version with the same spec', async () => {
    const timings = { pause: 3, capture: 2, unpause: 4 };
    w.sc.handlers['env.snapshot'] = (f) => ({
      snapshot: (f.payload as { name: string }).name,
      datasets: ['data'],
      frozen_for: 9,
      consistent: true,
      timings,
    });
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/snapshot`);
    assert.equal(r.status, 202);
    const vid = r.body.deployment.VersionID;
    assert.match(vid, /^ver_/);
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.deepEqual(phaseTable(phases), [
      ['snapshot', 'ok'],
      ['health', 'ok'],
      ['verdict', 'ok'],
    ]);
    delete w.sc.handlers['env.snapshot'];
    // The host's steps say where the freeze went.
    assert.deepEqual(phases[0].Evidence.timings, timings);
    assert.equal(phases[0].Evidence.frozen_for, 9);
    assert.deepEqual(phases[1].Evidence, { answered: true });
    assert.deepEqual(phases[2].Evidence.version, vid);
    assert.deepEqual(w.sc.commands('env.snapshot').at(-1)!.payload, { name: vid });
    assert.equal((await env(w.t, w.alpha)).CurrentVersionID, vid);
  });

  test('a failed snapshot keeps the previous version and changes nothing', async () => {
    const before = (await env(w.t, w.alpha)).CurrentVersionID;
    w.sc.handlers['env.snapshot'] = () => {
      throw new Error('pause failed');
    };
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/snapshot`);
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    delete w.sc.handlers['env.snapshot'];
    assert.equal(deployment.Status, 'failed');
    assert.equal(deployment.Error, 'snapshot: pause failed');
    assert.deepEqual(phaseTable(phases), [
      ['snapshot', 'failed'],
      ['health', 'skipped'],
      ['verdict', 'ok'],
    ]);
    assert.deepEqual(phases[2].Evidence, { kept: before });
    const e = await env(w.t, w.alpha);
    assert.equal(e.CurrentVersionID, before);
    assert.equal(e.Status, 'running');
  });

  test('rollback: only to a healthy snapshot of this environment; the verdict makes it current', async () => {
    assert.equal(
      (await w.t.req('POST', `/v1/envs/${w.alpha}/rollback`, { body: { version: 'ver_x' } })).status,
      400,
    );
    assert.equal((await w.t.req('POST', `/v1/envs/${w.alpha}/rollback`, { body: {} })).status, 400);
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/rollback`, { body: { version: v1 } });
    assert.equal(r.status, 202);
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.deepEqual(
      phases.map((p: any) => [p.Name, p.Evidence]),
      [
        ['restore', { snapshot: v1 }],
        ['health', { restored: v1 }],
        ['verdict', { version: v1 }],
      ],
    );
    assert.equal((await env(w.t, w.alpha)).CurrentVersionID, v1);
  });

  test('verify: 400 without an agent and verifier', async () => {
    const p = await w.t.req('POST', '/v1/projects', { body: { name: `plain-${dialect}` } });
    const w2 = { ...w, project: p.body.project.ID, alpha: p.body.environments[0].ID };
    await deploy(w2);
    const r = await w.t.req('POST', `/v1/envs/${w2.alpha}/verify`, { body: {} });
    assert.equal(r.status, 400);
    assert.match(r.body.error, /x-svc.agent.service and x-svc.verifier/);
  });

  test('verify: collect, capture version, grader fork, reward in the verdict, grader destroyed', async () => {
    const before = (await env(w.t, w.alpha)).CurrentVersionID;
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/verify`, { body: {} });
    assert.equal(r.status, 202);
    const capture = r.body.deployment.VersionID;
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    assert.deepEqual(
      phases.map((p: any) => p.Name),
      ['stop', 'collect', 'snapshot', 'clone', 'grade', 'verdict'],
    );
    assert.deepEqual(phases[0].Evidence, { agent_service: 'main', mode: 'pause' });
    assert.deepEqual(evidenceKeys(phases, 'collect'), ['bytes', 'files', 'missing', 'refused']);
    assert.deepEqual(evidenceKeys(phases, 'clone'), ['forked_in_ms', 'grader_env']);
    assert.deepEqual(evidenceKeys(phases, 'grade'), [
      'exit_code',
      'ran_for',
      'reward',
      'source',
      'stderr',
      'stdout',
    ]);
    assert.deepEqual(evidenceKeys(phases, 'verdict'), [
      'agent_frozen',
      'context',
      'exit_code',
      'missing',
      'processes',
      'refused',
      'reward',
      'snapshot',
      'source',
      'tests',
      'took_ms',
      'verifier_image',
    ]);
    const verdict = phases[5].Evidence;
    assert.equal(verdict.reward, 1);
    assert.equal(verdict.source, 'reward.txt');
    assert.equal(verdict.agent_frozen, true);
    assert.equal(verdict.refused, false);
    const collect = w.sc.commands('verify.collect').at(-1)!.payload as any;
    assert.deepEqual(collect, {
      id: deployment.ID,
      agent_service: 'main',
      collect: ['/work'],
      resume: false,
    });
    assert.deepEqual(w.sc.commands('env.snapshot').at(-1)!.payload, { name: capture, keep_paused: ['main'] });
    const grader = phases[3].Evidence.grader_env;
    assert.equal(deployment.TargetEnvID, grader);
    const run = w.sc.commands('verify.run').at(-1)!;
    assert.equal(run.env_id, grader);
    assert.equal((run.payload as any).refused, false);
    assert.equal(w.sc.commands('env.destroy').at(-1)!.env_id, grader);
    const g = await env(w.t, grader);
    assert.equal(g.Stage, 'verify');
    assert.equal(g.Status, 'destroyed');
    assert.match(g.Name, /^alpha-verify-/);
    // The agent env keeps its version; the capture exists, is healthy and can be forked.
    assert.equal((await env(w.t, w.alpha)).CurrentVersionID, before);
    const versions = (await w.t.req('GET', `/v1/envs/${w.alpha}/versions`)).body.versions;
    assert.equal(versions.find((v: any) => v.ID === capture).Healthy, true);
    const f = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, {
      body: { version: capture, name: 'from-capture' },
    });
    assert.equal((await finished(w.t, f.body.deployment.ID)).deployment.Status, 'succeeded');
  });

  test('verify with refusals grades as refused; resume unpauses; a failed grade has a null reward', async () => {
    w.sc.handlers['verify.collect'] = () => ({
      files: 0,
      bytes: 0,
      missing: [],
      refused: ['/work/link: symlink'],
    });
    w.sc.handlers['verify.run'] = (f) =>
      (f.payload as any).refused
        ? { reward: 0, exit_code: null, stdout: '', stderr: '', source: 'refused', ran_for: 0 }
        : { reward: 1, exit_code: 0, stdout: '', stderr: '', source: 'reward.txt', ran_for: 1 };
    const before: Record<string, number> = {};
    for (const kind of ['env.snapshot', 'env.fork', 'verify.run']) before[kind] = w.sc.commands(kind).length;
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/verify`, { body: { resume: true } });
    const { phases } = await finished(w.t, r.body.deployment.ID);
    // Spec verify table: the grade phase carries `refused: true` when collect refused anything.
    const grade = phases.find((ph: any) => ph.Name === 'grade').Evidence;
    assert.equal(grade.refused, true);
    assert.equal(grade.reward, 0);
    assert.equal(grade.source, 'refused');
    const v = phases.at(-1).Evidence;
    assert.equal(v.reward, 0);
    assert.equal(v.source, 'refused');
    assert.equal(v.refused, true);
    assert.equal(v.agent_frozen, false);
    // Graded 0 without a capture or a grader fork: those phases are skipped with the reason.
    for (const name of ['snapshot', 'clone']) {
      const ph = phases.find((x: any) => x.Name === name);
      assert.equal(ph.Status, 'skipped', name);
      assert.match(JSON.stringify(ph.Evidence), /submission refused/);
    }
    assert.equal(phases.find((x: any) => x.Name === 'grade').Evidence.source, 'refused');
    for (const kind of ['env.snapshot', 'env.fork', 'verify.run'])
      assert.equal(w.sc.commands(kind).length, before[kind], `${kind} sent for a refused submission`);
    assert.equal((w.sc.commands('verify.collect').at(-1)!.payload as any).resume, true);
    w.sc.handlers['verify.collect'] = () => ({ files: 1, bytes: 1, missing: [], refused: [] });
    w.sc.handlers['verify.run'] = () => {
      throw new Error('verifier image missing');
    };
    const bad = await w.t.req('POST', `/v1/envs/${w.alpha}/verify`, { body: {} });
    const out = await finished(w.t, bad.body.deployment.ID);
    delete w.sc.handlers['verify.collect'];
    delete w.sc.handlers['verify.run'];
    assert.equal(out.deployment.Status, 'failed');
    assert.equal(out.deployment.Error, 'grade: verifier image missing');
    assert.equal(out.phases.at(-1).Evidence.reward, null);
    const grader = out.phases[3].Evidence.grader_env;
    assert.equal((await env(w.t, grader)).Status, 'destroyed');
  });

  test('destroy: teardown then destroyed; operations on it are refused', async () => {
    const f = await w.t.req('POST', `/v1/envs/${w.alpha}/fork`, { body: { name: 'doomed' } });
    const forkId = f.body.deployment.EnvID;
    await finished(w.t, f.body.deployment.ID);
    const r = await w.t.req('DELETE', `/v1/envs/${forkId}`);
    assert.equal(r.status, 202);
    assert.deepEqual(Object.keys(r.body), ['deployment']);
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded');
    assert.deepEqual(
      phases.map((p: any) => [p.Name, p.Status, p.Evidence]),
      [
        ['teardown', 'ok', null],
        ['verdict', 'ok', null],
      ],
    );
    assert.equal(w.sc.commands('env.destroy').at(-1)!.env_id, forkId);
    assert.equal((await env(w.t, forkId)).Status, 'destroyed');
    assert.equal((await w.t.req('DELETE', `/v1/envs/${forkId}`)).status, 409);
    assert.equal((await w.t.req('POST', `/v1/envs/${forkId}/snapshot`)).status, 409);
    assert.equal(
      (await w.t.req('POST', `/v1/envs/${forkId}/exec`, { body: { service: 'main', cmd: ['true'] } })).status,
      409,
    );
  });
});
