// Failures that used to be dropped silently are logged where they matter: a grader
// fork that cannot be torn down, and a frame the hub could not write to a host's stream.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { frame } from '../../protocol/frames.ts';
import { openDb } from '../../server/db/open.ts';
import type { Db } from '../../server/db/types.ts';
import { Hub } from '../../server/hosts/hub.ts';
import type { HostHello } from '../../server/hosts/hub-events.ts';
import { bootstrap } from '../../server/identity/store.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { AGENT_COMPOSE, deploy, env, finished, type World, waitFor, world } from './harness.ts';

describe('dropped failures are logged', () => {
  let w: World;
  const logged: { msg: string; obj: Record<string, unknown> }[] = [];
  before(async () => {
    w = await world('sqlite');
    await deploy(w, AGENT_COMPOSE);
    const log = (obj: object, msg: string) => logged.push({ msg, obj: obj as Record<string, unknown> });
    w.t.server.orchestrator.engine.deps.log = { warn: log, error: log };
  });
  after(async () => {
    await w.sc.close().catch(() => {});
    await w.t.close();
  });

  test("a grader fork's failed teardown is logged with its reason", async () => {
    w.sc.handlers['env.destroy'] = () => {
      throw new Error('device or resource busy');
    };
    const r = await w.t.req('POST', `/v1/envs/${w.alpha}/verify`, { body: {} });
    const { deployment, phases } = await finished(w.t, r.body.deployment.ID);
    delete w.sc.handlers['env.destroy'];
    assert.equal(deployment.Status, 'succeeded');
    const grader = phases[3].Evidence.grader_env;
    assert.equal((await env(w.t, grader)).Status, 'failed');
    const entry = logged.find((l) => l.obj.env === grader);
    assert.ok(entry, `nothing logged for ${grader}: ${JSON.stringify(logged)}`);
    assert.equal(entry.obj.err, 'device or resource busy');
    assert.equal(entry.obj.deployment, deployment.ID);
  });
});

describe('the hub logs a write to a stream that died', () => {
  let dir: string;
  let db: Db;
  let hub: Hub;
  let server: Server;
  let sc: FakeSidecar;
  let send: HostHello['send'] = () => false;
  const sockets: Socket[] = [];
  const warned: { msg: string; obj: Record<string, unknown> }[] = [];
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-hub-'));
    db = (await openDb(join(dir, 'svc.db'))).db;
    const boot = await bootstrap(db, 'default', '');
    const teamId = boot?.team.ID as string;
    const log = {
      info: () => {},
      warn: (obj: object, msg: string) => warned.push({ msg, obj: obj as never }),
    };
    hub = new Hub(db, async () => ({ teamId, cloudId: '' }), log);
    hub.on('hello', (h) => {
      send = h.send;
    });
    server = createServer();
    server.on('connection', (s: Socket) => sockets.push(s));
    hub.attach(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    sc = await new FakeSidecar(`http://127.0.0.1:${(server.address() as AddressInfo).port}`).connect('jt');
  });
  after(async () => {
    await hub.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a frame written after its socket died is logged, not dropped silently', async () => {
    assert.equal(hub.isConnected(sc.hostId), true);
    (sockets.at(-1) as Socket).destroy();
    // The close has not been processed yet: the stream still counts as open, and the write fails.
    assert.equal(send(frame('heartbeat', {})), true);
    await waitFor(() => warned.some((l) => l.msg === 'write to host stream failed'), 10_000, 'the log line');
    const entry = warned.find((l) => l.msg === 'write to host stream failed');
    assert.equal(entry?.obj.host, sc.hostId);
    assert.equal(entry?.obj.frame, 'heartbeat');
  });
});
