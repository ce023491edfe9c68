// Both templates are real, deployable stacks: deployed with their warm command on real Docker,
// worked by "the agent" through exec, and graded by their own verifier.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ensureTemplateImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, type Real, startReal } from './real.ts';

describe('the templates deploy and grade on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let templates: any[];
  before(async () => {
    await ensureTemplateImages();
    r = await startReal();
    templates = (await r.t.req('GET', '/v1/templates')).body.templates;
  });
  after(async () => r?.close());

  for (const [name, solve, reward] of [
    ['rl-environment-ops', "grep -c 'level=ERROR' /work/incident.log > /work/answer.txt", 1],
    ['agent-runtime', 'echo done > /work/result.txt', 1],
  ] as const) {
    test(`${name}: deploy with warm, solve, verify → reward ${reward}`, async () => {
      const tpl = templates.find((x) => x.name === name);
      await r.t.req('POST', '/v1/projects', { body: { name, kind: tpl.kind } });
      const d = await r.t.req('POST', `/v1/projects/${name}/deploy`, {
        body: { compose: tpl.compose, ...(tpl.warm ? { warm: tpl.warm } : {}) },
      });
      assert.equal(d.status, 202, JSON.stringify(d.body));
      const out = await finished(r.t, d.body.deployment.ID);
      assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
      const env = out.deployment.EnvID;
      const agent = await exec(r.t, env, 'main', ['sh', '-c', solve]);
      assert.equal(agent.exit_code, 0, agent.stderr);
      const v = await r.t.req('POST', `/v1/envs/${env}/verify`, { body: {} });
      const graded = await finished(r.t, v.body.deployment.ID);
      assert.equal(graded.deployment.Status, 'succeeded', graded.deployment.Error);
      assert.equal(
        graded.phases.at(-1).Evidence.reward,
        reward,
        JSON.stringify(graded.phases.find((p: any) => p.Name === 'grade')?.Evidence),
      );
      const del = await r.t.req('DELETE', `/v1/envs/${env}`);
      assert.equal((await finished(r.t, del.body.deployment.ID)).deployment.Status, 'succeeded');
    });
  }
});
