// The runtime matrix's verify row: under runc and under gVisor, verify grades the answer from a
// frozen copy of the agent's files (under gVisor read where its gofer keeps them: the volume's and
// the root file system's host directories), a symlink the agent planted is refused and grades 0,
// and the verifier runs under the stack's runtime (its `uname -r` is gVisor's under gVisor), in its
// own image and inside a service of the grader fork (`service:`, sharing its network and volumes).
import assert from 'node:assert/strict';
import { release } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { agentStack, exec, finished, type Real, startReal } from './real.ts';

type Mode = 'image' | 'service';

const stack = (runtime: string, mode: Mode) =>
  agentStack(
    BUSYBOX_IMAGE,
    `x-svc.runtime: ${runtime}
x-svc.verifier:
  ${mode === 'image' ? `image: ${BUSYBOX_IMAGE}` : 'service: main'}
  command: ["sh", "-c", "uname -r; if [ \\"$$(cat /submission/work/answer)\\" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"]
  collect: [/work]
  timeout_sec: 60
`,
  );

describe('the runtime matrix: verify', { skip: tier('docker') }, async () => {
  const rows = await runtimeRows();
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
  });
  after(async () => r?.close());

  for (const { runtime, skip } of rows)
    for (const mode of ['image', 'service'] as const) {
      test(`under ${runtime}, verifier by ${mode}: the answer grades 1 from the frozen copy; a planted symlink is refused`, {
        skip,
      }, async () => {
        const project = `v-${runtime}-${mode}`;
        await r.t.req('POST', '/v1/projects', { body: { name: project, kind: 'agent' } });
        const d = await r.t.req('POST', `/v1/projects/${project}/deploy`, {
          body: { compose: stack(runtime, mode) },
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
        const graded = await verify();
        assert.equal(graded.at(-1).Evidence.reward, 1, JSON.stringify(graded.at(-1).Evidence));
        const grade = graded.find((p: any) => p.Name === 'grade').Evidence;
        assert.equal(grade.stdout.split('\n')[0] === release(), runtime === 'runc', grade.stdout);
        await exec(r.t, env, 'main', ['sh', '-c', 'ln -s /etc/passwd /work/link']);
        const refused = await verify();
        const v = refused.at(-1).Evidence;
        assert.deepEqual([v.reward, v.source, v.refused], [0, 'refused', true]);
        const collect = refused.find((p: any) => p.Name === 'collect').Evidence;
        assert.match(collect.refused[0], /^\/work\/link: symlink$/);
      });
    }
});
