// The request shapes that do not need a provider to check: where envd is addressed, where the
// toolbox is, how argv becomes one shell line, what cloud-init a machine gets, and how a provider's
// own error message is read out of each provider's error body.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { parse } from 'yaml';
import { userData } from './cloudvm.ts';
import { providerMessage } from './http.ts';
import { envdRoute } from './sandbox-a.ts';
import { shellQuote, toolboxOf } from './sandbox-b.ts';
import type { ProviderState } from './state-store.ts';

const cloud = (config: Record<string, string>) => ({
  id: 'cld_1',
  provider: 'x',
  config,
  api: 'https://api.example',
});
const state = (data: Record<string, string>) => ({ ref: 'isbx1', data }) as ProviderState;

test('envd: the SDK routing (sandbox.<domain> with headers) for E2B domains, per-sandbox hosts otherwise, envd_url forced', () => {
  const auth = `Basic ${Buffer.from('root:').toString('base64')}`;
  assert.deepEqual(envdRoute(cloud({ token: 't' }), state({ token: 'acc', domain: '' })), {
    base: 'https://sandbox.e2b.app',
    headers: {
      'X-Access-Token': 'acc',
      Authorization: auth,
      'E2b-Sandbox-Id': 'isbx1',
      'E2b-Sandbox-Port': '49983',
    },
  });
  assert.deepEqual(envdRoute(cloud({ token: 't' }), state({ domain: 'self.example', user: 'user' })), {
    base: 'https://49983-isbx1.self.example',
    headers: { Authorization: `Basic ${Buffer.from('user:').toString('base64')}` },
  });
  const forced = envdRoute(
    cloud({ token: 't', envd_url: 'http://127.0.0.1:5' }),
    state({ domain: 'self.example' }),
  );
  assert.equal(forced.base, 'http://127.0.0.1:5');
  assert.equal(forced.headers['E2b-Sandbox-Id'], 'isbx1');
  assert.equal(forced.headers['E2b-Sandbox-Port'], '49983');
});

test('toolbox: toolboxProxyUrl + /{id} when given, else the API toolbox path', () => {
  assert.equal(
    toolboxOf(cloud({}), { id: 'a-1', toolboxProxyUrl: 'https://proxy.example/toolbox/' }),
    'https://proxy.example/toolbox/a-1',
  );
  assert.equal(toolboxOf(cloud({}), { id: 'a-1' }), 'https://api.example/toolbox/a-1/toolbox');
});

test('shellQuote: the shell gives back exactly the argv', () => {
  const argv = ['printf', '%s\\n', "it's", 'a b', '$HOME', '`x`', '"q"', '', 'semi;colon'];
  const out = execFileSync('/bin/sh', ['-c', shellQuote(argv)], { encoding: 'utf8' });
  assert.equal(out, `${argv.slice(2).join('\n')}\n`);
});

test('cloud-init: packages, join.env with plain lines, the sidecar URL and install --env-file', () => {
  const text = userData({
    serverUrl: 'https://svc.example',
    joinToken: 'djt_abc',
    sidecarUrl: "https://rel.example/svcd?x='1'",
  });
  assert.ok(text.startsWith('#cloud-config\n'));
  const ud = parse(text);
  assert.deepEqual(ud.packages, [
    'ca-certificates',
    'curl',
    'docker.io',
    'docker-compose-v2',
    'zfsutils-linux',
  ]);
  assert.deepEqual(ud.write_files[0], {
    path: '/etc/svc/join.env',
    permissions: '0600',
    owner: 'root:root',
    content: 'SVC_SERVER=https://svc.example\nSVC_JOIN_TOKEN=djt_abc\n',
  });
  assert.ok(ud.runcmd.some((c: string) => c.includes(`'https://rel.example/svcd?x='\\''1'\\'''`)));
  const fetchLine = ud.runcmd.find((c: string) => c.includes('curl'));
  const url = (arch: string) =>
    execFileSync(
      '/bin/sh',
      ['-c', fetchLine.replace(/curl .*$/, 'printf %s "$ARCH"').replace('$(uname -m)', arch)],
      {
        encoding: 'utf8',
      },
    );
  assert.equal(url('aarch64'), '&arch=arm64', 'arm machines ask for the arm64 build');
  assert.equal(url('x86_64'), '');
  assert.equal(ud.runcmd.at(-1), '/usr/local/bin/svcd.download install --env-file /etc/svc/join.env');
  assert.ok(Buffer.byteLength(text) < 32 * 1024);
});

test("providerMessage reads each provider's error body", () => {
  assert.equal(providerMessage('{"code":400,"message":"bad template"}'), 'bad template');
  assert.equal(providerMessage('{"statusCode":400,"message":["a","b"],"error":"Bad Request"}'), 'a; b');
  assert.equal(providerMessage('{"error":{"code":"invalid_input","message":"bad name"}}'), 'bad name');
  assert.equal(providerMessage('upstream connect error'), 'upstream connect error');
  assert.equal(providerMessage(''), 'no message');
});
