// Warm pool on a real sidecar and real Docker: members are real forks whose containers
// wait paused; a claim thaws one and it answers exec at once; the network has its own subnet.
// Under runc and under gVisor (the runtime matrix): a gVisor member is paused by runsc (the sandbox
// stops its own tasks) and its spare exec is seen in gVisor's process table, the claimed member
// runs under gVisor.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { release } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { sandboxProcesses } from '../../sidecar/docker/gvisor.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, type Real, startReal } from './real.ts';

const stack = (runtime: string) => `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumes: [work:/work]
    healthcheck: {test: ["CMD", "test", "-d", "/work"], interval: 30s}
volumes:
  work: {}
x-svc.runtime: ${runtime}
`;

function states(envId: string): string[] {
  return execFileSync(
    'docker',
    [
      'ps',
      '-a',
      '--filter',
      `label=com.docker.compose.project=${envId.toLowerCase()}`,
      '--format',
      '{{.State}}',
    ],
    { encoding: 'utf8' },
  )
    .split('\n')
    .filter(Boolean);
}

/**
 * The spare exec shells waiting in the env's main container while it is paused: `docker top` under
 * runc; under gVisor the host sees only the sandbox, so gVisor's own table (a spare is a top-level
 * `sh` task beside the container's first process).
 */
async function spareShells(envId: string): Promise<number> {
  const id = execFileSync(
    'docker',
    ['ps', '-q', '--no-trunc', '--filter', `label=com.docker.compose.project=${envId.toLowerCase()}`],
    { encoding: 'utf8' },
  ).trim();
  const info = JSON.parse(execFileSync('docker', ['inspect', id], { encoding: 'utf8' }))[0];
  if (info.HostConfig.Runtime === 'runsc') {
    const tasks = await sandboxProcesses(info.State.Pid, id);
    return tasks.filter((t) => t.ppid === 0 && t.pid !== 1 && t.cmd === 'sh').length;
  }
  const top = execFileSync('docker', ['top', id, '-o', 'pid,args'], { encoding: 'utf8' });
  return top.split('\n').filter((l) => l.includes("svc_n='")).length;
}

describe('warm pool on real Docker', { skip: tier('docker') }, async () => {
  const rows = tier('docker') ? [] : await runtimeRows();
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
  });
  after(async () => r?.close());

  for (const { runtime, skip } of rows)
    test(`under ${runtime}: members wait paused; a claim thaws one that answers exec; DELETE destroys the rest`, {
      skip,
    }, async () => {
      const project = `pooled-${runtime}`;
      await r.t.req('POST', '/v1/projects', { body: { name: project } });
      const d = await finished(
        r.t,
        (await r.t.req('POST', `/v1/projects/${project}/deploy`, { body: { compose: stack(runtime) } })).body
          .deployment.ID,
      );
      assert.equal(d.deployment.Status, 'succeeded', `${d.deployment.Error}\n${r.log()}`);
      const ver = d.deployment.VersionID;
      assert.equal((await r.t.req('POST', `/v1/versions/${ver}/pool`, { body: { size: 1 } })).status, 200);
      let member = '';
      for (let i = 0; i < 600 && !member; i++) {
        const p = (await r.t.req('GET', `/v1/versions/${ver}/pool`)).body.pool;
        const rows = await r.t.server.ctx.db.all<{ env_id: string }>(
          'SELECT env_id FROM pool_members WHERE ready = 1',
        );
        if (p.ready === 1) member = rows[0].env_id;
        else await new Promise((res) => setTimeout(res, 200));
      }
      assert.ok(member, `no ready member\n${r.log()}`);
      assert.deepEqual(states(member), ['paused']);
      // It holds a spare exec for the first exec after the claim: a shell waiting on stdin (spare.ts).
      assert.equal(await spareShells(member), 1);

      const c = await r.t.req('POST', '/v1/sandboxes', {
        body: { from_version: ver, name: `episode-${runtime}` },
      });
      assert.equal(c.status, 201, JSON.stringify(c.body));
      assert.equal(c.body.environment.ID, member);
      assert.deepEqual(states(member), ['running']);
      const x = await exec(r.t, member, 'main', ['sh', '-c', 'echo hi > /work/f && cat /work/f']);
      assert.equal(x.stdout, 'hi\n');
      const kernel = (await exec(r.t, member, 'main', ['uname', '-r'])).stdout.trim();
      assert.equal(kernel === release(), runtime === 'runc', `the claimed member runs under ${runtime}`);
      // Its network got a subnet of its own from the sidecar's range.
      const subnet = execFileSync(
        'docker',
        [
          'network',
          'inspect',
          `${member.toLowerCase()}_default`,
          '--format',
          '{{(index .IPAM.Config 0).Subnet}}',
        ],
        { encoding: 'utf8' },
      ).trim();
      assert.match(subnet, /^10\.213\.\d+\.\d+\/27$/);

      await r.t.req('DELETE', `/v1/versions/${ver}/pool`);
      for (let i = 0; i < 600; i++) {
        const left = await r.t.server.ctx.db.all('SELECT env_id FROM pool_members');
        if (!left.length) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      assert.deepEqual(await r.t.server.ctx.db.all('SELECT env_id FROM pool_members'), []);
    });
});
