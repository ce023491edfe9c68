// The runtime matrix's verify row. Under runc, verify grades the answer from a frozen copy of the
// agent's files and a symlink the agent planted is refused and grades 0. Under gVisor the agent
// (checked non-root through gVisor's own process table) deploys, but verify is refused with a 400
// that says why: svcd copies from the frozen agent's root as the host sees it, and under gVisor the
// host sees the sandbox, not the agent's files.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { findRunsc } from '../../sidecar/docker/gvisor.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { agentStack, exec, finished, type Real, startReal } from './real.ts';

const stack = (runtime: string) =>
  agentStack(
    BUSYBOX_IMAGE,
    `x-svc.runtime: ${runtime}
x-svc.verifier:
  image: ${BUSYBOX_IMAGE}
  command: ["sh", "-c", "if [ \\"$$(cat /submission/work/answer)\\" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"]
  collect: [/work]
  timeout_sec: 60
`,
  );

describe('the runtime matrix: verify', { skip: tier('docker') }, async () => {
  const skipGvisor = tier('docker') || (await findRunsc()) ? false : '*** GVISOR ROWS SKIPPED: no runsc ***';
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
  });
  after(async () => r?.close());

  const rows = {
    runc: 'under runc: the answer grades 1 from the frozen copy; a planted symlink is refused',
    gvisor: 'under gvisor: the non-root agent deploys (checked in gVisor), verify is a 400 saying why',
  };
  for (const runtime of ['runc', 'gvisor'] as const) {
    test(rows[runtime], {
      skip: runtime === 'gvisor' ? skipGvisor : false,
    }, async () => {
      const project = `v-${runtime}`;
      await r.t.req('POST', '/v1/projects', { body: { name: project, kind: 'agent' } });
      const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
        body: { compose: stack(runtime) },
      });
      const out = await finished(r.t, d.body.deployment.ID);
      assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
      const env = out.deployment.EnvID;
      assert.equal((await exec(r.t, env, 'main', ['sh', '-c', 'echo 42 > /work/answer'])).exit_code, 0);
      const verify = async () => {
        const v = await r.t.req('POST', `/v1/envs/${env}/verify`, { body: { resume: true } });
        assert.equal(v.status, 202, JSON.stringify(v.body));
        const done = await finished(r.t, v.body.deployment.ID);
        assert.equal(done.deployment.Status, 'succeeded', `${done.deployment.Error}\n${r.log()}`);
        return done.phases;
      };
      if (runtime === 'gvisor') {
        const v = await r.t.req('POST', `/v1/envs/${env}/verify`, { body: { resume: true } });
        assert.equal(v.status, 400, JSON.stringify(v.body));
        assert.match(v.body.error, /runs under gvisor: verify cannot collect/);
        return;
      }
      const graded = await verify();
      assert.equal(graded.at(-1).Evidence.reward, 1, JSON.stringify(graded.at(-1).Evidence));
      await exec(r.t, env, 'main', ['sh', '-c', 'ln -s /etc/passwd /work/link']);
      const refused = await verify();
      const v = refused.at(-1).Evidence;
      assert.deepEqual([v.reward, v.source, v.refused], [0, 'refused', true]);
      const collect = refused.find((p: any) => p.Name === 'collect').Evidence;
      assert.match(collect.refused[0], /^\/work\/link: symlink$/);
    });
  }
});
