// Egress deny and its probe under gVisor. svcd runs gVisor in the container's own network namespace
// (`--network=host`: Docker's veth on the stack's bridge), so the host firewall rules deny it as
// under runc and the probe, which enters that namespace from the host, sees what the agent would:
// a deny stack is verified denied, and one without its host rules is caught and stopped.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { dockerClient } from './engine.ts';
import { EGRESS_LEAK_HOST, EgressLeak } from './errors.ts';
import { setUpRuntimes } from './gvisor.ts';
import { primaryIPv4 } from './hostip.ts';
import { cleanupTestEnvs, svc, type TestEnv, testEnv } from './testing.ts';

describe('egress deny and its probe under gVisor', { skip: tier('docker') }, async () => {
  // The same set-up svcd does at start: runsc found and registered with Docker when missing.
  const runtimes = tier('docker') ? null : await setUpRuntimes(dockerClient(), () => {});
  const skip = runtimes && !runtimes.gvisor ? `*** GVISOR ROWS SKIPPED: ${runtimes.problem} ***` : false;
  if (skip && (process.env.SVC_REQUIRE_TIERS ?? '').includes('docker')) throw new Error(skip);
  let listener: Server;
  let target = '';
  let deny: TestEnv;
  let bare: TestEnv;
  before(async () => {
    if (skip) return;
    await ensureTestImages();
    listener = createServer((s) => {
      s.on('error', () => {});
      s.end('hello\n');
    });
    await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
    target = `${await primaryIPv4()}:${(listener.address() as { port: number }).port}`;
    const spec = {
      egress: 'deny' as const,
      volumes: [],
      services: [svc('box', BUSYBOX_IMAGE)],
      runtime: 'gvisor' as const,
    };
    deny = await testEnv('gvd', spec);
    bare = await testEnv('gvb', spec, 'v2', { firewall: { programs: [] } });
    await Promise.all([deny.stack.up(120), bare.stack.up(120)]);
  });
  after(async () => {
    await cleanupTestEnvs();
    listener?.close();
  });

  it('the stack runs under gVisor and its deny is verified by the probe', { skip }, async () => {
    assert.match((await deny.stack.engine.exec('box', ['dmesg'])).stdout, /gVisor/i);
    const report = await deny.stack.verifyEgress({ internetTargets: [target] });
    assert.equal(report.verdict, 'denied (verified)');
  });

  it('without the host rules the probe catches the leak and stops the stack', { skip }, async () => {
    await assert.rejects(bare.stack.verifyEgress({ internetTargets: [] }), (err: unknown) => {
      assert.ok(err instanceof EgressLeak);
      assert.ok(err.message.startsWith(`${EGRESS_LEAK_HOST} (`), err.message);
      return true;
    });
  });
});
