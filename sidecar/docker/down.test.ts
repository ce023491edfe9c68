// Stack.down through the Engine API: everything of the project goes by its labels even
// when the compose file is gone (a crash between render and record), when someone removed a
// container first, and when two downs race; the deny stack's firewall rules go with it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { leftovers } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { listIsolationRules } from './firewall.ts';
import { cleanupTestEnvs, svc, testEnv } from './testing.ts';

const spec = () => ({
  egress: 'deny' as const,
  volumes: ['data'],
  services: [
    svc('a', BUSYBOX_IMAGE, { volumes: ['data:/data'] }),
    svc('b', BUSYBOX_IMAGE, { volumes: ['data:/data'] }),
  ],
});

const rulesOf = async (bridge: string) => (await listIsolationRules()).filter((r) => r.includes(bridge));

describe('stack down through the Engine API', { skip: tier('docker') }, () => {
  before(() => ensureTestImages());
  after(cleanupTestEnvs);

  it('removes containers, network, volumes and firewall rules with no compose file left', async () => {
    const env = await testEnv('dwn', spec());
    await env.stack.up(120);
    assert.equal(leftovers(env.stack.project).filter((l) => l.startsWith('container ')).length, 2);
    assert.ok((await rulesOf(env.stack.bridge)).length > 0);
    rmSync(env.stack.composeFile);
    await env.stack.down();
    assert.deepEqual(leftovers(env.stack.project), []);
    assert.deepEqual(await rulesOf(env.stack.bridge), []);
  });

  it('a container removed by someone else first, and two downs at once, are no error', async () => {
    const env = await testEnv('dwr', spec());
    await env.stack.up(120);
    const [first] = await env.stack.engine.containers();
    execFileSync('docker', ['rm', '-f', first.id], { stdio: 'ignore' });
    await Promise.all([env.stack.down(), env.stack.down()]);
    assert.deepEqual(leftovers(env.stack.project), []);
    assert.deepEqual(await rulesOf(env.stack.bridge), []);
  });
});
