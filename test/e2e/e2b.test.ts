// The E2B-compatible surface driven by the real `e2b` SDK against svc-server + a real svcd on
// Docker: a sandbox is an svc environment; its lifetime, tenancy, pause and templates as E2B's.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { Code, type ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Sandbox, SandboxNotFoundError } from 'e2b';
import { Filesystem } from '../../protocol/e2b/envd/gen/filesystem/filesystem_pb.js';
import { PYTHON } from '../clients/python-support.ts';
import { otherTeam } from '../support/api.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, IDLE_COMMAND, leftovers, type Real, startReal } from './real.ts';

const STACK = `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
`;

/** The sandbox's envd access token (the SDK keeps it protected). */
const tokenOf = (s: Sandbox) => (s as unknown as { envdAccessToken: string }).envdAccessToken;

/** Polls until `cond` holds (every 200 ms, 120 s at most: a bound on a broken server, not a timing claim). */
async function eventually(what: string, cond: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`never: ${what}`);
}

describe('E2B SDK against svc on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let url: string;
  const opts = (apiKey = r.t.key) => ({ apiUrl: url, sandboxUrl: url, apiKey, requestTimeoutMs: 300_000 });
  const envd = (s: Sandbox, path: string, token?: string) =>
    fetch(`${url}${path}`, {
      headers: {
        'e2b-sandbox-id': s.sandboxId,
        'e2b-sandbox-port': '49983',
        ...(token === undefined ? {} : { 'x-access-token': token }),
      },
    });
  const envOf = async (id: string) =>
    r.t.server.ctx.db.get<{ id: string; status: string }>(
      'SELECT id, status FROM environments WHERE name = ?',
      [id],
    );

  before(async () => {
    await ensureTestImages();
    r = await startReal({ env: { SVC_E2B_ADDR: '127.0.0.1:0', SVC_DEV_LOGIN: '1' } });
    url = r.t.server.e2b?.url ?? '';
    assert.ok(url, 'the E2B listener is on');
  });
  after(async () => r?.close());

  test('create from an image, get, list by metadata, health, tokens, kill destroys the environment', async () => {
    const s = await Sandbox.create(BUSYBOX_IMAGE, { ...opts(), metadata: { run: 'one', 'a b': 'c&d' } });
    const info = await Sandbox.getInfo(s.sandboxId, opts());
    assert.equal(info.templateId, BUSYBOX_IMAGE);
    assert.equal(info.state, 'running');
    assert.deepEqual(info.metadata, { run: 'one', 'a b': 'c&d' });
    assert.ok(info.endAt.getTime() - info.startedAt.getTime() >= 299_000, 'default timeout 300 s');
    assert.ok(await s.isRunning());
    // Every E2B sandbox is an svc environment, named by the sandbox id.
    const env = await envOf(s.sandboxId);
    assert.equal(env?.status, 'running');
    const envs = await r.t.req('GET', `/v1/envs/${env?.id}`);
    assert.equal(envs.status, 200);
    // The list's filters, as the SDK encodes them.
    const found = await Sandbox.list({ ...opts(), query: { metadata: { 'a b': 'c&d' } } }).nextItems();
    assert.deepEqual(
      found.map((x) => x.sandboxId),
      [s.sandboxId],
    );
    const none = await Sandbox.list({ ...opts(), query: { metadata: { run: 'two' } } }).nextItems();
    assert.deepEqual(none, []);
    const paused = await Sandbox.list({ ...opts(), query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(paused, []);
    // envd takes only this sandbox's own token.
    assert.equal((await envd(s, '/health')).status, 401);
    assert.equal((await envd(s, '/health', 'ea_wrong')).status, 401);
    assert.equal((await envd(s, '/health', tokenOf(s))).status, 204);
    // The token is stored hashed and sealed, never in the clear.
    const row = await r.t.server.ctx.db.get<Record<string, string>>(
      'SELECT * FROM e2b_sandboxes WHERE id = ?',
      [s.sandboxId],
    );
    assert.ok(row && !JSON.stringify(row).includes(tokenOf(s)));
    // envd's Connect-RPC services answer in both codecs (commands: e2b-commands.test.ts, on an image with bash).
    assert.ok((await s.files.list('/')).some((e) => e.name === 'work'));
    const proto = createClient(
      Filesystem,
      createConnectTransport({
        baseUrl: url,
        httpVersion: '1.1',
        useBinaryFormat: true,
        interceptors: [
          (next) => (req) => {
            req.header.set('e2b-sandbox-id', s.sandboxId);
            req.header.set('x-access-token', tokenOf(s));
            return next(req);
          },
        ],
      }),
    );
    assert.equal((await proto.stat({ path: '/work' })).entry?.name, 'work');
    await assert.rejects(proto.stat({ path: '/nope' }), (e: ConnectError) => e.code === Code.NotFound);

    assert.equal(await s.kill(), true);
    assert.equal(await s.isRunning(), false);
    await assert.rejects(Sandbox.getInfo(s.sandboxId, opts()), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(s.sandboxId, opts()), false);
    await eventually(
      'the environment is destroyed',
      async () => (await envOf(s.sandboxId))?.status === 'destroyed',
    );
    assert.deepEqual(leftovers(env?.id as string), []);
  });

  test('another team sees none of it; timeout extends; expiry destroys it; the server still answers', async () => {
    const other = await otherTeam(r.t, 'e2b-other@example.com');
    const s = await Sandbox.create(BUSYBOX_IMAGE, { ...opts(), timeoutMs: 600_000 });
    await assert.rejects(Sandbox.getInfo(s.sandboxId, opts(other.key)), SandboxNotFoundError);
    assert.equal(await Sandbox.kill(s.sandboxId, opts(other.key)), false);
    await assert.rejects(Sandbox.connect(s.sandboxId, opts(other.key)), SandboxNotFoundError);
    assert.deepEqual(await Sandbox.list(opts(other.key)).nextItems(), []);
    assert.ok(await s.isRunning(), 'untouched by the other team');

    const before = (await Sandbox.getInfo(s.sandboxId, opts())).endAt.getTime();
    await s.setTimeout(1000);
    const after = (await Sandbox.getInfo(s.sandboxId, opts())).endAt.getTime();
    assert.ok(after < before, 'setTimeout sets the end from now');
    const env = await envOf(s.sandboxId);
    await eventually('the sandbox expired', async () => !(await s.isRunning()));
    await assert.rejects(Sandbox.getInfo(s.sandboxId, opts()), SandboxNotFoundError);
    await eventually(
      'its environment is destroyed',
      async () => (await envOf(s.sandboxId))?.status === 'destroyed',
    );
    assert.deepEqual(leftovers(env?.id as string), []);
    assert.equal((await fetch(`${url}/v2/sandboxes`, { headers: { 'x-api-key': r.t.key } })).status, 200);
  });

  test('pause freezes it (health 502, 409 again); connect resumes it', async () => {
    const s = await Sandbox.create(BUSYBOX_IMAGE, opts());
    assert.equal(await s.pause(), true);
    assert.equal(await s.pause(), false, 'already paused: 409');
    assert.equal(await s.isRunning(), false);
    const listed = await Sandbox.list({ ...opts(), query: { state: ['paused'] } }).nextItems();
    assert.deepEqual(
      listed.map((x) => x.sandboxId),
      [s.sandboxId],
    );
    const again = await Sandbox.connect(s.sandboxId, opts());
    assert.ok(await again.isRunning());
    assert.equal((await Sandbox.getInfo(s.sandboxId, opts())).state, 'running');
    await again.kill();
  });

  test('fork {count: 2}: two independent copies of the stack, files included; list pages by X-Next-Token', async () => {
    const s = await Sandbox.create(BUSYBOX_IMAGE, { ...opts(), metadata: { fork: 'parent' } });
    const env = await envOf(s.sandboxId);
    await exec(r.t, env?.id as string, 'main', ['sh', '-c', 'echo parent > /work/mark']);
    const forks = await Sandbox.fork(s.sandboxId, { ...opts(), count: 2 });
    assert.equal(forks.length, 2);
    const ids: string[] = [];
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, String(f));
      ids.push(f.sandboxId);
      assert.ok(await f.isRunning());
    }
    const [a, b] = await Promise.all(ids.map(envOf));
    assert.equal((await exec(r.t, a?.id as string, 'main', ['cat', '/work/mark'])).stdout, 'parent\n');
    await exec(r.t, a?.id as string, 'main', ['sh', '-c', 'echo a > /work/mark']);
    assert.equal((await exec(r.t, b?.id as string, 'main', ['cat', '/work/mark'])).stdout, 'parent\n');
    assert.equal((await exec(r.t, env?.id as string, 'main', ['cat', '/work/mark'])).stdout, 'parent\n');
    // Three sandboxes with the parent's metadata, one page at a time.
    const seen: string[] = [];
    const pages = Sandbox.list({ ...opts(), limit: 2, query: { metadata: { fork: 'parent' } } });
    while (pages.hasNext) seen.push(...(await pages.nextItems()).map((x) => x.sandboxId));
    assert.deepEqual(seen.sort(), [s.sandboxId, ...ids].sort());
    const first = await fetch(`${url}/v2/sandboxes?limit=2`, { headers: { 'x-api-key': r.t.key } });
    assert.ok(first.headers.get('x-next-token'));
    assert.deepEqual(await Sandbox.getMetrics(s.sandboxId, opts()), []);
    for (const id of [s.sandboxId, ...ids]) assert.equal(await Sandbox.kill(id, opts()), true);
  });

  test("the Python SDK's routes (v1 create and connect), spoken by a stdlib script", async () => {
    // Not execFileSync: the server answering the script runs in this process.
    const { stdout: out } = await promisify(execFile)(
      PYTHON,
      ['test/e2e/fixtures/e2b_smoke.py', BUSYBOX_IMAGE],
      {
        env: { ...process.env, E2B_API_URL: url, E2B_API_KEY: r.t.key },
        encoding: 'utf8',
        timeout: 300_000,
      },
    );
    assert.match(out, /^created sbx\w+\nok\n$/);
  });

  test('templates: ver_… and <project>/<env> fork the stack; an unknown image is a 404 naming it', async () => {
    await r.t.req('POST', '/v1/projects', { body: { name: 'e2bstack' } });
    const d = await finished(
      r.t,
      (await r.t.req('POST', '/v1/projects/e2bstack/deploy', { body: { compose: STACK } })).body.deployment
        .ID,
    );
    assert.equal(d.deployment.Status, 'succeeded', `${d.deployment.Error}\n${r.log()}`);
    const byVersion = await Sandbox.create(d.deployment.VersionID, opts());
    assert.equal((await Sandbox.getInfo(byVersion.sandboxId, opts())).templateId, d.deployment.VersionID);
    const byName = await Sandbox.create('e2bstack/alpha', opts());
    assert.ok(await byName.isRunning());
    const forked = await envOf(byName.sandboxId);
    const row = await r.t.server.ctx.db.get<{ stage: string }>(
      'SELECT stage FROM environments WHERE id = ?',
      [forked?.id ?? ''],
    );
    assert.equal(row?.stage, 'fork');
    await byVersion.kill();
    await byName.kill();

    const missing = 'svc-test/no-such-image:latest';
    await assert.rejects(Sandbox.create(missing, opts()), (e: Error) =>
      e.message.includes(`template '${missing}' not found`),
    );
    await eventually('the failed environment is gone', async () => {
      const env = await r.t.server.ctx.db.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM environments WHERE status NOT IN ('destroyed', 'destroying') AND name LIKE 'sbx%'",
      );
      return Number(env?.n) === 0;
    });
  });
});
