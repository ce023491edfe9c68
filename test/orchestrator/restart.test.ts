// A control-plane restart never leaves a deployment running forever: the real program is killed
// with SIGKILL mid-phase and started again on the same database.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { dbTarget, forEachDialect } from '../support/server.ts';
import { AGENT_COMPOSE, waitFor } from './harness.ts';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });

forEachDialect('control-plane restart mid-deployment', (dialect) => {
  let proc: ChildProcess | null = null;
  let url = '';
  let db = '';
  let cleanup = () => {};
  const key = `dak_${randomBytes(16).toString('hex')}`;

  const start = async () => {
    proc = spawn(
      process.execPath,
      ['programs/svc-server.ts', '-addr', url.replace('http://', ''), '-db', db],
      {
        env: { ...process.env, SVC_BOOTSTRAP_KEY: key, SVC_PUBLIC_URL: url },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    await waitFor(
      async () => (await fetch(`${url}/health`).catch(() => null))?.ok === true,
      20_000,
      'server up',
    );
  };
  const api = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: r.status, body: (await r.json()) as any };
  };
  const finished = async (id: string) => {
    let last: any;
    await waitFor(
      async () => {
        last = (await api('GET', `/v1/deployments/${id}`)).body;
        return Boolean(last.deployment.FinishedAt);
      },
      60_000,
      `deployment ${id}`,
    );
    return last;
  };

  before(async () => {
    url = `http://127.0.0.1:${await freePort()}`;
    ({ target: db, cleanup } = await dbTarget(dialect));
    await start();
  });
  after(() => {
    proc?.kill('SIGKILL');
    cleanup();
  });

  test('a deploy cut off by SIGKILL is finished after restart: the phase fails, the verdict rolls back', async () => {
    const jt = await api('POST', '/v1/join-tokens', {});
    const sc = await new FakeSidecar(url).connect(jt.body.token);
    const p = await api('POST', '/v1/projects', { name: 'r' });
    const alpha = p.body.environments[0].ID;
    const d1 = await api('POST', '/v1/projects/r/deploy', { compose: AGENT_COMPOSE });
    const v1 = (await finished(d1.body.deployment.ID)).deployment.VersionID;

    sc.answer = false;
    const d2 = await api('POST', '/v1/projects/r/deploy', { compose: AGENT_COMPOSE });
    await sc.nextCommand('env.create');
    proc!.kill('SIGKILL');
    await sc.closed;
    await start();
    sc.answer = true;
    await sc.connect();

    const out = await finished(d2.body.deployment.ID);
    assert.equal(out.deployment.Status, 'rolled_back');
    // On a shared database the restarted process is another replica: it adopts the deployment once
    // the dead one's lease lapsed, and says so; on SQLite a restart is the only way to get here.
    const reasons = ['prepare: control plane restarted during this phase'];
    if (dialect === 'postgres') reasons.push('prepare: the control-plane replica running this phase stopped');
    assert.ok(reasons.includes(out.deployment.Error), out.deployment.Error);
    const byName = Object.fromEntries(out.phases.map((x: any) => [x.Name, x]));
    assert.equal(byName.prepare.Status, 'failed');
    assert.equal(byName.start.Status, 'skipped');
    assert.deepEqual(byName.verdict.Evidence, { reverted_to: v1 });
    assert.deepEqual(sc.commands('env.rollback').at(-1)!.payload, { snapshot: v1 });
    const e = (await api('GET', `/v1/envs/${alpha}`)).body.environment;
    assert.equal(e.CurrentVersionID, v1);
    assert.equal(e.Status, 'running');
    const running = (await api('GET', `/v1/envs/${alpha}/deployments`)).body.deployments.filter(
      (x: any) => !x.FinishedAt,
    );
    assert.deepEqual(running, []);
    await sc.close();
  });
});
