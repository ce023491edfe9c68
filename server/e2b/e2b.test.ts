// The E2B-compatible listener without Docker: what it refuses and how (the real `e2b` SDK and raw
// requests), the list filters as the SDK encodes them, and envd's gates before any sandbox work.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthenticationError, Sandbox, SandboxNotFoundError } from 'e2b';
import { startTestServer, type TestServer } from '../../test/support/server.ts';
import { parseConfig } from '../config/config.ts';
import { insertEnv } from '../envs/store.ts';
import { hashSecret } from '../identity/secrets.ts';
import { insertProject } from '../projects/store.ts';
import { parseMetadataFilter, parseStates } from './routes.ts';
import { OpenCalls } from './rpc-context.ts';
import { insertSandbox } from './store.ts';

describe('E2B-compatible listener (no Docker)', () => {
  let t: TestServer;
  let url: string;
  const opts = () => ({ apiUrl: url, sandboxUrl: url, apiKey: t.key, requestTimeoutMs: 30_000 });
  before(async () => {
    t = await startTestServer('sqlite', { SVC_E2B_ADDR: '127.0.0.1:0' });
    url = t.server.e2b?.url ?? '';
  });
  after(async () => t?.close());

  test('-e2b-addr / SVC_E2B_ADDR turn it on; --dev at 127.0.0.1:3049 unless set; off by default', () => {
    assert.equal(parseConfig([], {}).e2b, null);
    assert.deepEqual(parseConfig(['--dev'], {}).e2b, { host: '127.0.0.1', port: 3049 });
    assert.deepEqual(parseConfig(['-e2b-addr', ':4000'], {}).e2b, { host: '0.0.0.0', port: 4000 });
    assert.deepEqual(parseConfig(['--dev'], { SVC_E2B_ADDR: '127.0.0.1:4001' }).e2b, {
      host: '127.0.0.1',
      port: 4001,
    });
    assert.throws(() => parseConfig(['-e2b-addr', 'nope'], {}), /-e2b-addr: 'nope' is not host:port/);
    assert.equal(parseConfig([], {}).e2bDefaultTemplate, 'debian:bookworm-slim');
    assert.equal(parseConfig([], { SVC_E2B_DEFAULT_TEMPLATE: 'ver_x' }).e2bDefaultTemplate, 'ver_x');
  });

  test('API routes need an svc team key in X-API-KEY: 401 {code, message} without one', async () => {
    for (const headers of [{}, { 'x-api-key': 'e2b_0123' }, { 'x-api-key': 'dak_unknownunknownunknown' }]) {
      const r = await fetch(`${url}/v2/sandboxes`, { headers });
      assert.equal(r.status, 401);
      const body = (await r.json()) as { code: number; message: string };
      assert.equal(body.code, 401);
      assert.equal(typeof body.message, 'string');
    }
    await assert.rejects(
      Sandbox.create('base', { ...opts(), apiKey: 'dak_wrongwrongwrongwrong' }),
      AuthenticationError,
    );
  });

  test('an unknown template is a 404 naming it; an unknown sandbox is NotFound', async () => {
    await assert.rejects(Sandbox.create('ver_nosuchversion', opts()), (e: Error) =>
      /template 'ver_nosuchversion' not found/.test(e.message),
    );
    const r = await fetch(`${url}/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': t.key, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'Bad Image!' }),
    });
    assert.equal(r.status, 404);
    assert.match(((await r.json()) as { message: string }).message, /template 'Bad Image!' not found/);
    await assert.rejects(Sandbox.getInfo('sbxnosuch', opts()), SandboxNotFoundError);
    assert.equal(await Sandbox.kill('sbxnosuch', opts()), false);
    await assert.rejects(Sandbox.connect('sbxnosuch', opts()), SandboxNotFoundError);
  });

  test('bad input is a 400 {code, message}, never a 500', async () => {
    const bodies = [{}, { templateID: 'x', timeout: -1 }, { templateID: 'x', unknown: 1 }, { templateID: 7 }];
    for (const body of bodies) {
      const r = await fetch(`${url}/v2/sandboxes`, {
        method: 'POST',
        headers: { 'x-api-key': t.key, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal(((await r.json()) as { code: number }).code, 400);
    }
    for (const q of ['state=dead', 'limit=0', 'limit=x', 'metadata=%25E0%25A4%25A']) {
      const r = await fetch(`${url}/v2/sandboxes?${q}`, { headers: { 'x-api-key': t.key } });
      assert.equal(r.status, 400, q);
    }
  });

  test('the list filters as the SDK sends them: metadata double-encoded, state comma-joined', () => {
    const sent = new URLSearchParams({
      [encodeURIComponent('a b&c')]: encodeURIComponent('x=y%z'),
      k: 'v',
    }).toString();
    assert.deepEqual(parseMetadataFilter(sent), { 'a b&c': 'x=y%z', k: 'v' });
    assert.deepEqual(parseStates('running,paused'), ['running', 'paused']);
    assert.deepEqual(parseStates(['paused']), ['paused']);
    assert.deepEqual(parseStates(undefined), ['running', 'paused']);
  });

  test('envd: 502 for an unknown or gone sandbox (isRunning false), RPC refusals in Connect shape', async () => {
    const teamId = (await t.server.ctx.db.get<{ id: string }>('SELECT id FROM teams LIMIT 1'))?.id ?? '';
    const h = (id: string, token?: string) => ({
      'e2b-sandbox-id': id,
      'e2b-sandbox-port': '49983',
      ...(token ? { 'x-access-token': token } : {}),
    });
    assert.equal((await fetch(`${url}/health`, { headers: h('sbxnosuch', 'x') })).status, 502);
    assert.equal((await fetch(`${url}/health`)).status, 400);
    // A row whose environment does not exist reads as gone, and is forgotten.
    const orphan = {
      id: 'sbxorphan',
      team_id: teamId,
      env_id: 'env_none',
      template_id: 'base',
      token_hash: hashSecret('tok'),
      token_sealed: t.server.ctx.secrets.seal('tok'),
      metadata: {},
      state: 'running',
      started_at: new Date().toISOString(),
      end_at: new Date(Date.now() + 60_000).toISOString(),
    } as const;
    await insertSandbox(t.server.ctx.db, orphan);
    assert.equal((await fetch(`${url}/health`, { headers: h('sbxorphan', 'tok') })).status, 502);
    assert.equal(
      await t.server.ctx.db.get('SELECT id FROM e2b_sandboxes WHERE id = ?', ['sbxorphan']),
      undefined,
    );
    // A sandbox whose environment failed is forgotten, and the environment destroyed.
    const project = await insertProject(t.server.ctx.db, teamId, 'e2bfailed', 'rl-environment', '');
    const failed = await insertEnv(t.server.ctx.db, {
      projectId: project.ID,
      teamId,
      name: 'sbxfailed',
      stage: 'alpha',
      status: 'failed',
    });
    await insertSandbox(t.server.ctx.db, { ...orphan, id: 'sbxfailed', env_id: failed.ID });
    assert.equal((await fetch(`${url}/health`, { headers: h('sbxfailed', 'tok') })).status, 502);
    const destroying = await t.server.ctx.db.get<{ kind: string }>(
      'SELECT kind FROM deployments WHERE env_id = ?',
      [failed.ID],
    );
    assert.equal(destroying?.kind, 'destroy');
    const rpc = await fetch(`${url}/process.Process/List`, {
      method: 'POST',
      headers: { ...h('sbxnosuch', 'x'), 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(rpc.status, 502);
    assert.equal(((await rpc.json()) as { code: string }).code, 'unavailable');
  });

  test("a sandbox's open calls end together when it ends, and only its own", () => {
    const calls = new OpenCalls();
    const closers: (() => void)[] = [];
    const until = { once: (_: 'close', fn: () => void) => closers.push(fn) };
    const [a1, a2, b] = [calls.open('a', until), calls.open('a', until), calls.open('b', until)];
    calls.end('a');
    assert.deepEqual([a1.aborted, a2.aborted, b.aborted], [true, true, false]);
    assert.match(String((a1.reason as Error).message), /sandbox a ended/);
    for (const close of closers) close();
    assert.equal(calls.size, 0);
  });
});
