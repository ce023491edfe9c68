// Network mode `none` (a deny image sandbox): the one service has only loopback. No network, no
// bridge, no subnet and no firewall rules are made; the service still reaches itself on loopback,
// reaches neither the host nor another environment, and the egress probe verifies the denial from
// inside it. A restart through compose (the project exists) keeps it so, and down leaves nothing.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { Timings } from '../../shared/timings.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { listIsolationRules } from './firewall.ts';
import { primaryIPv4 } from './hostip.ts';
import type { StackSpec } from './stack.ts';
import { cleanupTestEnvs, IDLE, svc, type TestEnv, testEnv } from './testing.ts';

const docker = new Docker();
const WEB = ['sh', '-c', `httpd -p 8080 -h /tmp; ${IDLE}`];

const spec = (): StackSpec => ({
  egress: 'deny',
  network: 'none',
  volumes: [],
  services: [svc('main', BUSYBOX_IMAGE, { command: WEB })],
});

async function projectNetworks(project: string): Promise<string[]> {
  const nets = await docker.listNetworks({ filters: { label: [`com.docker.compose.project=${project}`] } });
  return nets.map((n) => n.Name);
}

describe("network mode 'none' on a real engine", { skip: tier('docker') }, () => {
  let listener: Server;
  let port = 0;
  const hits: string[] = [];
  let hostIp = '';
  let peer: TestEnv; // an allow stack with a port: something another environment could reach

  before(async () => {
    await ensureTestImages();
    listener = createServer((s) => {
      hits.push(s.remoteAddress ?? '?');
      s.on('error', () => {});
      s.end('hello\n');
    });
    await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
    port = (listener.address() as { port: number }).port;
    hostIp = await primaryIPv4();
    peer = await testEnv('nnp', {
      egress: 'allow',
      volumes: [],
      services: [svc('web', BUSYBOX_IMAGE, { command: WEB, ports: ['8080'] })],
    });
    await peer.stack.up(120);
  });
  after(async () => {
    await cleanupTestEnvs();
    listener.close();
  });

  for (const composeCreate of [false, true])
    it(`made through ${composeCreate ? 'compose' : 'the Engine API'}: loopback only, nothing of a network, denial verified`, async () => {
      const env = await testEnv(composeCreate ? 'nnc' : 'nne', spec(), 'v2', { composeCreate });
      const timings = new Timings();
      await env.stack.up(120, undefined, undefined, timings);
      const steps = Object.keys(timings.ms);
      assert.ok(!steps.includes('firewall'), `no firewall step: ${steps.join(', ')}`);
      assert.deepEqual(await projectNetworks(env.stack.project), []);
      assert.deepEqual(
        (await listIsolationRules()).filter((r) => r.includes(env.stack.bridge)),
        [],
      );
      const c = await env.stack.engine.find('main');
      const info = await docker.getContainer(c.id).inspect();
      assert.equal(info.HostConfig.NetworkMode, 'none');
      const devs = await env.stack.engine.exec('main', ['cat', '/proc/net/dev']);
      const names = devs.stdout
        .split('\n')
        .filter((l) => l.includes(':'))
        .map((l) => l.split(':')[0].trim());
      assert.deepEqual(names, ['lo'], devs.stdout);

      const nc = async (addr: string, p: number) =>
        (await env.stack.engine.exec('main', ['nc', '-w', '2', addr, String(p)])).exit_code;
      assert.equal(await nc('127.0.0.1', 8080), 0, 'the service reaches itself on loopback');
      assert.notEqual(await nc(hostIp, port), 0);
      const published = Number((await peer.stack.endpoints()).web.split(':')[1]);
      assert.notEqual(await nc(hostIp, published), 0);
      assert.deepEqual(hits, []);

      const report = await env.stack.verifyEgress({ internetTargets: [`${hostIp}:${port}`] });
      assert.equal(report.verdict, 'denied (verified)');
      assert.deepEqual(report.reached, []);
      // The target and the host's primary IP: there is no gateway to try.
      assert.equal(report.blocked.length, 2, report.blocked.join(', '));
      assert.deepEqual(hits, []);

      // Up again: the project exists, so compose recreates it, still without a network.
      await env.stack.up(120);
      assert.deepEqual(await projectNetworks(env.stack.project), []);
      assert.equal(
        (await env.stack.engine.exec('main', ['nc', '-w', '2', '127.0.0.1', '8080'])).exit_code,
        0,
      );

      await env.stack.down();
      const left = await docker.listContainers({
        all: true,
        filters: { label: [`com.docker.compose.project=${env.stack.project}`] },
      });
      assert.deepEqual(left, []);
      assert.deepEqual(await projectNetworks(env.stack.project), []);
    });
});
