// The agent service never runs as uid 0, on real Docker through env.create (the parser once
// refused `0` and `root` but `-0`, which Docker reads as uid 0, ran the agent as root). Refused
// before start: `-0` and a user name that the image's /etc/passwd maps to uid 0. After start, the
// kernel's uid of the agent's process is checked.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { refuseRootProcess } from '../docker/users.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, createPayload, testContext } from './testing.ts';

const TOOR_IMAGE = `svc-test/i17-toor:${randomBytes(4).toString('hex')}`;

describe('the agent is never root, on real Docker', { skip: tier('docker') }, () => {
  let dir: string;
  let ctx: SidecarContext;
  const made: string[] = [];
  const create = async (user: string, image = BUSYBOX_IMAGE) => {
    const envId = testEnvId('agent');
    made.push(envId);
    const run = commandRunner(ctx, envId, 'agent');
    const services = [svc('main', image, { user }), svc('helper', BUSYBOX_IMAGE)];
    const r = await run('env.create', createPayload(services, 'main'));
    const containers = await engineOf(ctx, envId).containers();
    return { envId, r, containers, run };
  };
  before(async () => {
    await ensureTestImages();
    execFileSync('docker', ['build', '-q', '-t', TOOR_IMAGE, '-'], {
      input: `FROM ${BUSYBOX_IMAGE}\nRUN echo 'toor:x:0:0:root by another name:/root:/bin/sh' >> /etc/passwd\n`,
    });
    dir = mkdtempSync(join(tmpdir(), 'svc-agent-'));
    ctx = await testContext(join(dir, 'data'));
  });
  after(async () => {
    for (const envId of made) await commandRunner(ctx, envId, 'end')('env.destroy', {}).catch(() => {});
    execFileSync('docker', ['rmi', '-f', TOOR_IMAGE], { stdio: 'ignore' });
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test("user '-0' is refused before the agent starts, and nothing is left running", async () => {
    const { r, containers } = await create('-0');
    assert.equal(r.ok, false);
    assert.match(r.error ?? '', /the agent is never root \(user '-0' is uid 0\)/);
    assert.deepEqual(containers, []);
  });

  test('a user name that is uid 0 in the image’s /etc/passwd is refused', async () => {
    const { r, containers } = await create('toor', TOOR_IMAGE);
    assert.equal(r.ok, false);
    assert.match(
      r.error ?? '',
      /the agent is never root \(user 'toor' is uid 0 in the image's \/etc\/passwd\)/,
    );
    assert.deepEqual(containers, []);
  });

  test('a non-root name starts; the real uid of each process is what the kernel says', async () => {
    const { envId, r } = await create('agent');
    assert.equal(r.ok, true, r.error);
    const engine = engineOf(ctx, envId);
    assert.equal(await refuseRootProcess(engine, 'main'), 1000);
    // A service left to the image's default user runs as root: the check sees it.
    await assert.rejects(
      refuseRootProcess(engine, 'helper'),
      /the agent is never root \(its process runs as uid 0\/0\/0\/0\)/,
    );
  });
});
