// Egress on a real engine: a deny stack reaches neither the host nor other environments and the
// probe verifies it; an allow stack reaches the probe address and publishes endpoints; a leak
// (a probe target the stack can reach, or a deny stack without its host rules) stops the stack
// and fails with the fixed message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { PROBE_SOURCE } from './egress.ts';
import { EGRESS_LEAK_HOST, EGRESS_LEAK_INTERNET, EgressLeak, ProbeError } from './errors.ts';
import { listIsolationRules } from './firewall.ts';
import { primaryIPv4 } from './hostip.ts';
import { findBash } from './probe-shell.ts';
import type { Stack } from './stack.ts';
import { cleanupTestEnvs, IDLE, svc, type TestEnv, testEnv } from './testing.ts';

const skip = tier('docker');
const WEB = ['sh', '-c', `httpd -p 8080 -h /tmp; ${IDLE}`];

function inspect(format: string, id: string): string {
  return execFileSync('docker', ['inspect', '--format', format, id], { encoding: 'utf8' }).trim();
}

async function ipOf(stack: Stack, service: string): Promise<string> {
  const c = await stack.engine.find(service);
  return inspect(`{{(index .NetworkSettings.Networks "${stack.network}").IPAddress}}`, c.id);
}

async function states(stack: Stack): Promise<string[]> {
  return (await stack.engine.containers()).map((c) => c.state);
}

describe('egress', { skip }, () => {
  let listener: Server;
  let port = 0;
  const hits: string[] = [];
  let hostIp = '';
  let deny: TestEnv; // box + peer, host firewall rules
  let open: TestEnv; // web, published port
  let bare: TestEnv; // deny without host firewall rules: the probe must notice

  before(async () => {
    await ensureTestImages();
    listener = createServer((s) => {
      hits.push(s.remoteAddress ?? '?');
      s.on('error', () => {}); // the probe resets its connections
      s.end('hello\n');
    });
    await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
    port = (listener.address() as { port: number }).port;
    hostIp = await primaryIPv4();
    deny = await testEnv('egd', {
      egress: 'deny',
      volumes: [],
      services: [svc('box', BUSYBOX_IMAGE), svc('peer', BUSYBOX_IMAGE, { command: WEB })],
    });
    open = await testEnv('ega', {
      egress: 'allow',
      volumes: [],
      services: [svc('web', BUSYBOX_IMAGE, { command: WEB, ports: ['8080'] })],
    });
    bare = await testEnv(
      'egb',
      { egress: 'deny', volumes: [], services: [svc('box', BUSYBOX_IMAGE)] },
      'v2',
      { firewall: { programs: [] } },
    );
    await Promise.all([deny.stack.up(120), open.stack.up(120), bare.stack.up(120)]);
  });
  after(async () => {
    await cleanupTestEnvs();
    listener.close();
  });

  const connect = async (from: Stack, service: string, addr: string, p: number, waitSec = 3) =>
    (await from.engine.exec(service, ['nc', '-w', String(waitSec), addr, String(p)])).exit_code;

  it('deny: the host is unreachable via the bridge gateway and its primary IP', async () => {
    const gateway = inspect('{{(index .IPAM.Config 0).Gateway}}', deny.stack.network);
    assert.notEqual(await connect(deny.stack, 'box', gateway, port), 0);
    assert.notEqual(await connect(deny.stack, 'box', hostIp, port), 0);
    assert.deepEqual(hits, []);
    // The same connects work from the allow stack: the listener is really there.
    assert.equal(await connect(open.stack, 'web', hostIp, port), 0);
    assert.equal(hits.length, 1);
  });

  it('deny: other environments are unreachable, the stack’s own services are', async () => {
    assert.notEqual(await connect(deny.stack, 'box', await ipOf(open.stack, 'web'), 8080), 0);
    assert.notEqual(await connect(deny.stack, 'box', await ipOf(bare.stack, 'box'), 8080), 0);
    const published = (await open.stack.endpoints()).web.split(':')[1];
    assert.notEqual(await connect(deny.stack, 'box', hostIp, Number(published)), 0);
    assert.equal(await connect(deny.stack, 'box', 'peer', 8080), 0);
  });

  it('deny: still so in the moment Docker re-inserts its isolation jump (on every network create)', async () => {
    // Docker 20.10 deletes FORWARD's jump to DOCKER-ISOLATION-STAGE-1 and inserts it again, in two
    // updates, whenever any network is created; this holds that moment open (CI caught a deny
    // stack reaching the published port below in it).
    const jump = ['FORWARD', '-j', 'DOCKER-ISOLATION-STAGE-1'];
    const published = Number((await open.stack.endpoints()).web.split(':')[1]);
    const web = await ipOf(open.stack, 'web');
    execFileSync('iptables', ['-D', ...jump]);
    try {
      assert.notEqual(await connect(deny.stack, 'box', hostIp, published, 1), 0);
      assert.notEqual(await connect(deny.stack, 'box', web, 8080, 1), 0);
      assert.equal(await connect(deny.stack, 'box', 'peer', 8080, 1), 0);
    } finally {
      execFileSync('iptables', ['-I', ...jump]);
    }
  });

  it('deny: the probe says denied (verified), by the bash script and by the Node program alike', async () => {
    const node = [process.execPath, '-e', PROBE_SOURCE];
    for (const command of [undefined, node]) {
      const report = await deny.stack.verifyEgress({ internetTargets: [`${hostIp}:${port}`], command });
      assert.equal(report.verdict, 'denied (verified)');
      assert.deepEqual(report.reached, []);
      assert.equal(report.blocked.length, 3, report.blocked.join(', ')); // target, gateway, host IP
    }
    assert.ok(await findBash(), 'this host has bash: the first report was the script');
  });

  it('allow: the bash script and the Node program reach the same targets', async () => {
    const targets = [`${hostIp}:${port}`, '127.0.0.1:9'];
    const shell = await open.stack.verifyEgress({ internetTargets: targets });
    const node = await open.stack.verifyEgress({
      internetTargets: targets,
      command: [process.execPath, '-e', PROBE_SOURCE],
    });
    // Each run opens its own host listener on a port of its own: the addresses are compared.
    const hosts = (list: string[]) => list.map((t) => t.slice(0, t.lastIndexOf(':'))).sort();
    assert.deepEqual(hosts(shell.reached), hosts(node.reached));
    assert.ok(shell.reached.includes(`${hostIp}:${port}`));
    assert.deepEqual(
      hosts(shell.blocked.map((b) => b.split(' ')[0])),
      hosts(node.blocked.map((b) => b.split(' ')[0])),
    );
  });

  it('allow: the probe reaches the configured address; ports are published as endpoints', async () => {
    const report = await open.stack.verifyEgress({ internetTargets: [`${hostIp}:${port}`] });
    assert.equal(report.verdict, 'allowed');
    assert.ok(report.reached.includes(`${hostIp}:${port}`), report.reached.join(', '));
    const endpoints = await open.stack.endpoints();
    assert.match(endpoints.web, new RegExp(`^${hostIp.replaceAll('.', '\\.')}:\\d+$`));
    const res = await fetch(`http://${endpoints.web}/`);
    assert.ok(res.status > 0);
    await res.body?.cancel();
  });

  it('a probe that cannot run fails with the probe error, not a verdict', async () => {
    await assert.rejects(open.stack.verifyEgress({ command: ['/nonexistent/probe'] }), (err: unknown) => {
      assert.ok(err instanceof ProbeError);
      assert.match(err.message, /^egress probe failed to run: /);
      return true;
    });
  });

  it('deny without the host rules: the probe catches the host leak and stops the stack', async () => {
    await assert.rejects(bare.stack.verifyEgress({ internetTargets: [] }), (err: unknown) => {
      assert.ok(err instanceof EgressLeak);
      assert.ok(err.message.startsWith(`${EGRESS_LEAK_HOST} (`), err.message);
      return true;
    });
    assert.deepEqual(await states(bare.stack), ['exited']);
  });

  it('a leaky target (reachable inside the stack network) fails with the exact message and stops the stack', async () => {
    const peer = await ipOf(deny.stack, 'peer');
    await assert.rejects(deny.stack.verifyEgress({ internetTargets: [`${peer}:8080`] }), (err: unknown) => {
      assert.ok(err instanceof EgressLeak);
      assert.equal(err.message, EGRESS_LEAK_INTERNET);
      return true;
    });
    assert.deepEqual(await states(deny.stack), ['exited', 'exited']);
  });

  it('down removes the deny stack’s firewall rules', async () => {
    assert.ok((await listIsolationRules()).some((r) => r.includes(deny.stack.bridge)));
    await deny.stack.down();
    assert.deepEqual(
      (await listIsolationRules()).filter((r) => r.includes(deny.stack.bridge)),
      [],
    );
  });
});
