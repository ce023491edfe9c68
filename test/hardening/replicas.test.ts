// Two svc-server processes (the real program) on one Postgres, with a simulated sidecar whose
// commands the test answers or holds (the hold point: env.create held on the host):
//   - SIGKILL the replica running a deployment held at env.create: the other adopts it once its
//     lease lapses and ends it by the failure rule (the host, reconnected to the survivor, is
//     asked to clean up), env.create is never sent again, and the survivor is alive afterwards;
//   - the same at the fault suite's other hold points (env.fork, env.snapshot, env.rollback,
//     verify.collect, verify.run, env.destroy): the deployment ends by the failure rule on the
//     survivor, the held command is failed and never sent again, nothing of the environment is
//     left pending or running;
//   - with the host's stream on a third replica C: B adopts A's deployment and its verdict reaches
//     the host through C, once;
//   - a deploy asked of replica B while replica A runs one of the same environment waits for it
//     and starts only after it has finished.
// Except in the last test, the host's stream is on the replica that sends it commands.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { CommandKind } from '../../protocol/commands.ts';
import type { Frame } from '../../protocol/frames.ts';
import { openDb } from '../../server/db/open.ts';
import type { Db } from '../../server/db/types.ts';
import { watchAlive } from '../support/alive.ts';
import { defaultHandlers, FakeSidecar } from '../support/fake-sidecar.ts';
import { dbTarget } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { until } from './faults-stack.ts';

const LEASE_SEC = 3;
const COMPOSE = 'services:\n  app:\n    image: busybox:1.36\n';

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

class Replica {
  child: ChildProcess | null = null;
  log = '';
  url = '';

  readonly dsn: string;
  readonly key: string;
  readonly secrets: string;

  constructor(dsn: string, key: string, secrets: string) {
    this.dsn = dsn;
    this.key = key;
    this.secrets = secrets;
  }

  async start(): Promise<this> {
    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    const child = spawn(
      process.execPath,
      ['programs/svc-server.ts', '-addr', `127.0.0.1:${port}`, '-db', this.dsn],
      {
        env: {
          ...process.env,
          SVC_BOOTSTRAP_KEY: this.key,
          SVC_SECRETS_KEY: this.secrets,
          SVC_PUBLIC_URL: this.url,
          SVC_DEPLOY_LEASE: String(LEASE_SEC),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout?.on('data', (d) => (this.log += d));
    child.stderr?.on('data', (d) => (this.log += d));
    this.child = child;
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`svc-server exited:\n${this.log.slice(-4000)}`);
      return fetch(`${this.url}/health`).then(
        (r) => r.ok,
        () => false,
      );
    }, 'svc-server to answer /health');
    return this;
  }

  async req(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await fetch(this.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : null };
  }

  async stop(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await gone;
  }
}

/** A host answering every command except env.create, which it holds until `release()`. */
function holdingCreate(sc: FakeSidecar) {
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  sc.handlers['env.create'] = async (f: Frame) => {
    await released;
    return {
      endpoints: {},
      started_in: 1,
      digests: {},
      storage: 'dir',
      egress: (f.payload as { egress: string }).egress === 'allow' ? 'allowed' : 'denied (verified)',
    };
  };
  return release;
}

/** A host answering every command, holding the first of `kind` until the returned release. */
function holding(sc: FakeSidecar, kind: CommandKind) {
  let release!: () => void;
  const released = new Promise<void>((r) => {
    release = r;
  });
  let first = true;
  sc.handlers[kind] = async (f: Frame, me: FakeSidecar) => {
    if (first) {
      first = false;
      await released;
    }
    return defaultHandlers[kind](f, me);
  };
  return release;
}

/** The first command of `kind` the host received. */
const sent = (sc: FakeSidecar, kind: string) =>
  until(() => sc.commands(kind)[0], `the host to receive ${kind}`, 30_000);

/** The same host, its stream moved to `url` (its old one closed, as after a replica's death). */
async function moveHost(old: FakeSidecar, url: string): Promise<FakeSidecar> {
  await old.close();
  const sc = new FakeSidecar(url);
  sc.hostId = old.hostId;
  sc.secret = old.secret;
  return sc.connect();
}

describe('replicas on one Postgres: deployments', { skip: tier('postgres') }, () => {
  let a: Replica;
  let b: Replica;
  let host: FakeSidecar;
  let db: Db;
  let n = 0;

  before(async () => {
    const { target } = await dbTarget('postgres');
    db = (await openDb(target)).db;
    const key = `dak_replicas${randomBytes(16).toString('hex')}`;
    const secrets = randomBytes(32).toString('base64');
    a = await new Replica(target, key, secrets).start();
    b = await new Replica(target, key, secrets).start();
  });
  after(async () => {
    await host?.close().catch(() => {});
    await a?.stop('SIGTERM');
    await b?.stop('SIGTERM');
    await db?.close();
  });

  /** A new project, and the host's stream on `r` (joined the first time, moved after). */
  async function setup(r: Replica): Promise<{ project: string; release: () => void }> {
    const project = `p${++n}`;
    assert.equal((await r.req('POST', '/v1/projects', { name: project })).status, 201);
    if (!host)
      host = await new FakeSidecar(r.url).connect((await r.req('POST', '/v1/join-tokens', {})).body.token);
    else host = await moveHost(host, r.url);
    return { project, release: holdingCreate(host) };
  }

  const deployment = async (r: Replica, id: string) => (await r.req('GET', `/v1/deployments/${id}`)).body;
  const finished = (r: Replica, id: string) =>
    until(
      async () => {
        const d = await deployment(r, id).catch(() => null);
        return d?.deployment?.FinishedAt ? d : null;
      },
      `deployment ${id} to finish\n--- A\n${a.log.slice(-3000)}\n--- B\n${b.log.slice(-3000)}`,
      60_000,
    );

  test('a deploy asked of B while A runs one of the same environment waits for it, then runs', async () => {
    const { project, release } = await setup(a);
    const one = await a.req('POST', `/v1/projects/${project}/deploy`, { compose: COMPOSE });
    assert.equal(one.status, 202, JSON.stringify(one.body));
    await sent(host, 'env.create');
    const two = await b.req('POST', `/v1/projects/${project}/deploy`, { compose: COMPOSE });
    assert.equal(two.status, 202, JSON.stringify(two.body));
    assert.equal(two.body.deployment.EnvID, one.body.deployment.EnvID);
    const id2 = two.body.deployment.ID;
    // B found the environment held and said so; the deployment is still pending, nothing ran.
    await until(
      () => b.log.includes(id2) && /waits for another deployment of its environment/.test(b.log),
      'B to wait for the environment',
    );
    const waiting = await deployment(a, id2);
    assert.equal(waiting.deployment.Status, 'pending');
    assert.ok(waiting.phases.every((p: any) => p.Status === 'pending'));
    release();
    const first = await finished(a, one.body.deployment.ID);
    assert.equal(first.deployment.Status, 'succeeded', first.deployment.Error);
    // The host moves to B, which now runs the second deploy (on A's stream it would need routing).
    host = await moveHost(host, b.url);
    holdingCreate(host)();
    const second = await finished(b, id2);
    assert.ok(
      second.phases[0].StartedAt >= first.deployment.FinishedAt,
      'the second deploy started before the first had finished',
    );
    assert.ok(['succeeded', 'rolled_back'].includes(second.deployment.Status), second.deployment.Error);
  });

  test('SIGKILL the replica running a deployment held at env.create: the other adopts it and ends it; nothing runs twice', async () => {
    const { project } = await setup(a);
    const started = await a.req('POST', `/v1/projects/${project}/deploy`, { compose: COMPOSE });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const id = started.body.deployment.ID;
    const create = await sent(host, 'env.create').catch(async (err) => {
      throw new Error(`${err.message}: ${JSON.stringify(await deployment(a, id))}\n${a.log.slice(-3000)}`);
    });
    const alive = watchAlive();
    await a.stop('SIGKILL');
    await host.closed;
    host = await moveHost(host, b.url);
    const out = await finished(b, id);
    assert.equal(out.deployment.Status, 'failed');
    assert.equal(out.deployment.Error, 'prepare: the control-plane replica running this phase stopped');
    // The verdict cleaned up on the host, now on B; env.create was never sent again.
    assert.equal(host.commands('env.create').length, 0);
    assert.equal(host.commands('env.destroy').length, 1);
    const row = (await b.req('GET', `/v1/deployments/${id}`)).body;
    assert.equal(row.phases.at(-1).Status, 'ok');
    // The command the dead replica waited for is failed with why, not left in flight.
    const cmd = await db.get<{ status: string; error: string }>(
      'SELECT status, error FROM commands WHERE id = ?',
      [create.command_id as string],
    );
    assert.deepEqual(
      { ...cmd },
      { status: 'failed', error: 'the control-plane replica waiting for this result stopped' },
    );
    // B is alive and answering once the lease bound has passed (every lease timer fired).
    await alive.assertAliveAfter(b.url, LEASE_SEC * 1000, b.child ?? undefined);
    // A replica started again later is a new owner and takes nothing that B runs.
    a = await new Replica(a.dsn, a.key, a.secrets).start();
    assert.equal((await deployment(a, id)).deployment.Status, 'failed');
  });

  // The fault suite's other hold points, each in a deployment of another kind: whichever phase the
  // dead replica was waiting on fails by the failure rule on the survivor, and the held command is
  // never sent again.
  const AGENT = `services:\n  main:\n    image: busybox:1.36\n    user: "1000:1000"\n    volumes: [work:/work]\nvolumes: {work: {}}
x-svc.agent.service: main\nx-svc.verifier:\n  image: busybox:1.36\n  command: [sh, -c, "echo 1 > /logs/verifier/reward.txt"]
  collect: [/work]\n  timeout_sec: 60\n`;
  const kinds: { kind: CommandKind; ask: (r: Replica, env: string, version: string) => Promise<any> }[] = [
    { kind: 'env.fork', ask: (r, env) => r.req('POST', `/v1/envs/${env}/fork`, {}) },
    { kind: 'env.snapshot', ask: (r, env) => r.req('POST', `/v1/envs/${env}/snapshot`) },
    {
      kind: 'env.rollback',
      ask: (r, env, version) => r.req('POST', `/v1/envs/${env}/rollback`, { version }),
    },
    { kind: 'verify.collect', ask: (r, env) => r.req('POST', `/v1/envs/${env}/verify`, {}) },
    { kind: 'verify.run', ask: (r, env) => r.req('POST', `/v1/envs/${env}/verify`, {}) },
    { kind: 'env.destroy', ask: (r, env) => r.req('DELETE', `/v1/envs/${env}`) },
  ];
  for (const { kind, ask } of kinds) {
    test(`SIGKILL the replica running a deployment held at ${kind}: the survivor ends it; the command is not sent again`, async () => {
      if (a.child?.exitCode !== null || a.child?.signalCode !== null)
        a = await new Replica(a.dsn, a.key, a.secrets).start();
      const { project, release } = await setup(a);
      release();
      const d = await a.req('POST', `/v1/projects/${project}/deploy`, { compose: AGENT });
      assert.equal(d.status, 202, JSON.stringify(d.body));
      const deployed = await finished(a, d.body.deployment.ID);
      assert.equal(deployed.deployment.Status, 'succeeded', deployed.deployment.Error);
      const env = deployed.deployment.EnvID as string;
      holding(host, kind);
      const seen = host.commands(kind).length; // a deploy sends env.snapshot too
      const started = await ask(a, env, deployed.deployment.VersionID);
      assert.equal(started.status, 202, JSON.stringify(started.body));
      const id = started.body.deployment.ID;
      const held = await until(() => host.commands(kind)[seen], `the host to receive ${kind}`, 30_000);
      await a.stop('SIGKILL');
      host = await moveHost(host, b.url);
      const out = await finished(b, id);
      assert.notEqual(out.deployment.Status, 'succeeded');
      assert.match(
        out.deployment.Error,
        /the control-plane replica running this phase stopped/,
        JSON.stringify(out),
      );
      assert.ok(!host.commands(kind).some((c) => c.command_id === held.command_id), `${kind} was sent again`);
      const row = await db.get<{ status: string }>('SELECT status FROM commands WHERE id = ?', [
        held.command_id as string,
      ]);
      assert.equal(row?.status, 'failed');
      // The environment is settled: no deployment of it is left pending or running.
      const open = await db.get<{ n: number }>(
        "SELECT COUNT(*) AS n FROM deployments WHERE env_id = ? AND status IN ('pending', 'running')",
        [env],
      );
      assert.equal(Number(open?.n), 0);
    });
  }
  test("the host on a third replica: A's deployment held at env.create is adopted by B, whose verdict reaches the host through C", async () => {
    if (a.child?.exitCode !== null || a.child?.signalCode !== null)
      a = await new Replica(a.dsn, a.key, a.secrets).start();
    const c = await new Replica(a.dsn, a.key, a.secrets).start();
    try {
      const { project } = await setup(c);
      const started = await a.req('POST', `/v1/projects/${project}/deploy`, { compose: COMPOSE });
      assert.equal(started.status, 202, JSON.stringify(started.body));
      const id = started.body.deployment.ID;
      const create = await sent(host, 'env.create');
      const before = await db.get<{ origin: string }>('SELECT origin FROM commands WHERE id = ?', [
        create.command_id as string,
      ]);
      assert.notEqual(before?.origin, '', 'env.create was routed to the host on C');
      await a.stop('SIGKILL');
      const out = await finished(b, id);
      assert.equal(out.deployment.Status, 'failed');
      assert.equal(out.deployment.Error, 'prepare: the control-plane replica running this phase stopped');
      // The cleanup went from B through C to the host, once; env.create was not sent again.
      assert.equal(host.commands('env.create').length, 1);
      const destroys = host.commands('env.destroy');
      assert.equal(destroys.length, 1);
      const routed = await db.get<{ status: string; holder: string; origin: string }>(
        'SELECT status, holder, origin FROM commands WHERE id = ?',
        [destroys[0].command_id as string],
      );
      assert.equal(routed?.status, 'succeeded');
      assert.notEqual(routed?.holder, routed?.origin, 'the verdict was asked by B and carried out by C');
    } finally {
      await c.stop('SIGTERM');
    }
  });
});
