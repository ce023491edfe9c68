// A Harbor task graded as `svc verify` does without `--resume`: the agent stays frozen, so the
// snapshot waits for the health of every other service, the one-shot `svc-workdir-owner` (which
// gives the work folder to the agent's user and exits 0) included. It is complete, as it was when
// the task deployed; every wait after a start (the snapshot's thaw, a fork, a rollback, the
// grader's fork) must say so. Run on the plain directory store (`svcd join` on ext4).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WORKDIR_OWNER } from '../../cli/harbor.ts';
import { ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import {
  completeTask,
  deployTask,
  run,
  SIMPLE_TASK,
  startHarbor,
  stopHarbor,
  verify,
} from './harbor-support.ts';
import { finished, type Real } from './real.ts';

describe('a Harbor task verified with the agent frozen, on the directory store', {
  skip: tier('docker'),
}, () => {
  let r: Real;
  const dirs: string[] = [];
  before(async () => {
    await ensureTestImages();
    r = await startHarbor('frozen');
  });
  after(() => stopHarbor(r, dirs));

  const frozen = (env: string) => verify(r, env, undefined, false);
  const agentPaused = async (env: string) => {
    const e = await r.t.req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd: ['true'] } });
    return e.status !== 200 && /paused/.test(JSON.stringify(e.body));
  };

  test('wrong answer 0, solution 1, again after a rollback; the work-folder one-shot counts as complete', async () => {
    const hosts = await r.t.req('GET', '/v1/hosts');
    assert.equal(
      hosts.body.hosts[0].Capabilities.storage,
      'dir',
      'this suite is about the directory store: run it with the temporary directory on ext4 or xfs, as CI does',
    );
    const dir = completeTask(SIMPLE_TASK.task, SIMPLE_TASK.files);
    dirs.push(dir);
    const { env } = await deployTask(r, 'frozen', 'simple', dir);
    const versions = await r.t.req('GET', `/v1/envs/${env}/versions`);
    const spec = versions.body.versions[0].Spec;
    assert.ok(
      spec.services.some((s: { name: string }) => s.name === WORKDIR_OWNER),
      'the task has the one-shot',
    );

    // A second agent of the same version: a fork, whose start runs the one-shot again.
    const f = await r.t.req('POST', `/v1/envs/${env}/fork`, { body: {} });
    assert.equal(f.status, 202, JSON.stringify(f.body));
    const forked = await finished(r.t, f.body.deployment.ID);
    assert.equal(forked.deployment.Status, 'succeeded', forked.deployment.Error);
    const other = forked.deployment.EnvID as string;

    await run(r, env, SIMPLE_TASK.wrong);
    const wrong = await frozen(env);
    assert.equal(wrong.reward, 0, `a wrong answer\n${wrong.output}`);
    assert.equal(wrong.agent_frozen, true);
    // Harbor's tests read the work in the capture (the grader's fork), so the task declares
    // nothing to collect: collect reports that, and refuses nothing.
    assert.deepEqual(wrong.collect, { files: 0, bytes: 0, missing: [], refused: [] });
    assert.ok(await agentPaused(env), 'the agent stays frozen after verify without --resume');

    await run(r, other, SIMPLE_TASK.solve);
    const graded = await frozen(other);
    assert.equal(graded.reward, 1, `the reference solution\n${graded.output}`);
    assert.equal(graded.source, 'reward.txt');
    assert.ok(await agentPaused(other));

    // A rollback to the capture starts the stack again, one-shot first, and thaws the agent.
    const rb = await r.t.req('POST', `/v1/envs/${other}/rollback`, { body: { version: graded.capture } });
    assert.equal(rb.status, 202, JSON.stringify(rb.body));
    const rolled = await finished(r.t, rb.body.deployment.ID);
    assert.equal(rolled.deployment.Status, 'succeeded', rolled.deployment.Error);
    assert.equal(await agentPaused(other), false);
    const again = await frozen(other);
    assert.equal(again.reward, 1, `the solution, graded again after the rollback\n${again.output}`);
  });
});
