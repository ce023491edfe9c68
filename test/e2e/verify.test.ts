// verify on real Docker: the agent is frozen, /work copied without following links, a verifier
// computes the reward from /submission on a grader fork; refusals grade 0 with source refused.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { agentStack, exec, finished, leftovers, type Real, startReal } from './real.ts';

const AGENT = agentStack(
  BUSYBOX_IMAGE,
  `x-svc.verifier:
  image: ${BUSYBOX_IMAGE}
  command: ["sh", "-c", "id -u; ls -l /submission/work; if [ \\"$$(cat /submission/work/answer)\\" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; touch /submission/work/tamper 2>/dev/null && echo writable || echo read-only"]
  collect: [/work, /tmp/notes]
  timeout_sec: 60
`,
);

const state = (envId: string, service: string) =>
  execFileSync(
    'docker',
    [
      'ps',
      '-a',
      '--filter',
      `label=com.docker.compose.project=${envId.toLowerCase()}`,
      '--filter',
      `label=com.docker.compose.service=${service}`,
      '--format',
      '{{.State}}',
    ],
    {
      encoding: 'utf8',
    },
  ).trim();

describe('verify on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let env: string;
  const verify = async (resume: boolean) => {
    const v = await r.t.req('POST', `/v1/envs/${env}/verify`, { body: { resume } });
    assert.equal(v.status, 202, JSON.stringify(v.body));
    return finished(r.t, v.body.deployment.ID);
  };
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    await r.t.req('POST', '/v1/projects', { body: { name: 'agent', kind: 'agent' } });
    const d = await r.t.req('POST', '/v1/projects/agent/deploy', { body: { compose: AGENT } });
    const out = await finished(r.t, d.body.deployment.ID);
    assert.equal(out.deployment.Status, 'succeeded', `${out.deployment.Error}\n${r.log()}`);
    env = out.deployment.EnvID;
  });
  after(async () => r?.close());

  test('the agent runs as its user and can write its fresh volume', async () => {
    const out = await exec(r.t, env, 'main', ['sh', '-c', 'id -u; echo 42 > /work/answer; cat /work/answer']);
    assert.deepEqual(out, { exit_code: 0, stdout: '1000\n42\n', stderr: '' });
  });

  test('verify: reward from /submission, verifier as uid 0 with a read-only copy, agent left frozen', async () => {
    const { deployment, phases } = await verify(false);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
    const verdict = phases.at(-1).Evidence;
    assert.equal(verdict.reward, 1);
    assert.equal(verdict.source, 'reward.txt');
    assert.equal(verdict.agent_frozen, true);
    const grade = phases.find((p: any) => p.Name === 'grade').Evidence;
    assert.match(grade.stdout, /^0\n/, 'the verifier runs as uid 0');
    assert.match(grade.stdout, /read-only/);
    assert.deepEqual(phases.find((p: any) => p.Name === 'collect').Evidence, {
      files: 1,
      bytes: 3,
      missing: ['/tmp/notes'],
      refused: [],
    });
    assert.deepEqual(phases.at(-1).Evidence.missing, ['/tmp/notes']);
    assert.equal(state(env, 'main'), 'paused');
    assert.equal(state(env, 'checker'), 'running');
    const sub = join(r.dataDir, 'verify', deployment.ID, 'submission', 'work', 'answer');
    assert.equal(readFileSync(sub, 'utf8'), '42\n');
    assert.equal(statSync(sub).uid, 0, 'the copy is root-owned');
    const grader = phases.find((p: any) => p.Name === 'clone').Evidence.grader_env;
    assert.deepEqual(leftovers(grader), [], 'the grader fork is gone');
  });

  test('verify with resume thaws the agent; refusals (symlink, fifo, too many files) grade 0 and keep no copy', async () => {
    const again = await verify(true);
    assert.equal(again.phases.at(-1).Evidence.reward, 1);
    assert.equal(state(env, 'main'), 'running');
    const cases: [string, string, RegExp][] = [
      ['ln -s /etc/passwd /work/link', 'rm /work/link', /^\/work\/link: symlink$/],
      ['mkfifo /work/pipe', 'rm /work/pipe', /^\/work\/pipe: fifo$/],
      [
        'mkdir /work/many && cd /work/many && i=0; while [ $i -le 20000 ]; do : > f$i; i=$((i+1)); done',
        'rm -rf /work/many',
        /^\/work: more than 20000 files$/,
      ],
    ];
    for (const [make, undo, reason] of cases) {
      const made = await exec(r.t, env, 'main', ['sh', '-c', make]);
      assert.equal(made.exit_code, 0, made.stderr);
      const { deployment, phases } = await verify(true);
      assert.equal(deployment.Status, 'succeeded', deployment.Error);
      const v = phases.at(-1).Evidence;
      assert.deepEqual([v.reward, v.source, v.refused], [0, 'refused', true], make);
      const grade = phases.find((p: any) => p.Name === 'grade').Evidence;
      assert.deepEqual([grade.reward, grade.source, grade.refused], [0, 'refused', true], make);
      const collect = phases.find((p: any) => p.Name === 'collect').Evidence;
      assert.equal(collect.refused.length, 1);
      assert.match(collect.refused[0], reason);
      assert.deepEqual(
        readdirSync(join(r.dataDir, 'verify', deployment.ID)).filter((f) => f === 'submission'),
        [],
        'the whole copy is removed',
      );
      await exec(r.t, env, 'main', ['sh', '-c', undo]);
    }
  });

  test('a wrong answer grades 0 from reward.txt', async () => {
    await exec(r.t, env, 'main', ['rm', '-f', '/work/answer']);
    const { phases } = await verify(true);
    assert.equal(phases.at(-1).Evidence.reward, 0);
    assert.equal(phases.at(-1).Evidence.source, 'reward.txt');
  });

  test('destroy removes the verify work directories and the stored results of its commands', async () => {
    assert.ok(readdirSync(join(r.dataDir, 'verify')).length > 0);
    const d = await r.t.req('DELETE', `/v1/envs/${env}`);
    assert.equal(d.status, 202);
    assert.equal((await finished(r.t, d.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.deepEqual(readdirSync(join(r.dataDir, 'verify')), []);
    const commands = join(r.dataDir, 'commands');
    const left = readdirSync(commands)
      .filter((f) => f.endsWith('.json'))
      .map((f) => JSON.parse(readFileSync(join(commands, f), 'utf8')) as { kind: string; env_id: string })
      .filter((c) => c.env_id === env);
    assert.deepEqual(
      left.map((c) => c.kind),
      ['env.destroy'],
      'only the destroy result itself stays',
    );
  });
});
