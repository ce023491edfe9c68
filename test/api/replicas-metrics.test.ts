// Each replica's /metrics says what crossed between it and the others: the notifications it sent
// and heard by kind (a command for a host held elsewhere, its answer, host locations) and how many
// hosts have their stream here or on another replica. An operator reads from them whether the
// balancer sends requests to the replica that holds their host. Real Postgres, two replicas in
// this process, a fake sidecar on the first.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { deploy, joinFake, waitFor } from '../orchestrator/harness.ts';
import type { FakeSidecar } from '../support/fake-sidecar.ts';
import { sample } from '../support/metrics.ts';
import { startReplica, startTestServer, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';

const TOKEN = 'metrics-operator-token-replicas-0123';
const TIMING = { heartbeatMs: 100, leaseMs: 600 };

describe('replica traffic in /metrics', { skip: tier('postgres') }, () => {
  let a: TestServer;
  let b: TestServer;
  let sc: FakeSidecar;
  before(async () => {
    a = await startTestServer('postgres', { SVC_METRICS_TOKEN: TOKEN }, { replica: TIMING });
    b = await startReplica(a, { SVC_METRICS_TOKEN: TOKEN }, { replica: TIMING });
    sc = await joinFake(a);
  });
  after(async () => {
    await sc?.close();
    await b?.close();
    await a?.close();
  });

  const scrape = async (t: TestServer) => {
    const r = await t.req('GET', '/metrics', { token: TOKEN });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as string;
  };
  const sent = (text: string, kind: string) =>
    sample(text, 'svc_replica_messages_total', { direction: 'sent', kind }) || 0;
  const received = (text: string, kind: string) =>
    sample(text, 'svc_replica_messages_total', { direction: 'received', kind }) || 0;

  test('a deploy through B: B sent its commands to A, A answered them; the host is here on A, elsewhere on B', async () => {
    await waitFor(async () => sample(await scrape(b), 'svc_replica_hosts', { stream: 'elsewhere' }) === 1);
    const [a0, b0] = [await scrape(a), await scrape(b)];
    const p = await b.req('POST', '/v1/projects', { body: { name: 'p1' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    const done = await deploy({ t: b, sc, project: p.body.project.ID, alpha: p.body.environments[0].ID });
    assert.equal(done.deployment.Status, 'succeeded', JSON.stringify(done));
    const [a1, b1] = [await scrape(a), await scrape(b)];
    const commands = sent(b1, 'cmd') - sent(b0, 'cmd');
    assert.ok(commands >= 1, `B sent ${commands} commands`);
    assert.equal(received(a1, 'cmd') - received(a0, 'cmd'), commands);
    assert.equal(sent(a1, 'done') - sent(a0, 'done'), commands);
    assert.equal(sent(a1, 'cmd'), 0, 'A holds the host: it sends no command elsewhere');
    assert.equal(sample(a1, 'svc_replica_hosts', { stream: 'here' }), 1);
    assert.equal(sample(a1, 'svc_replica_hosts', { stream: 'elsewhere' }), 0);
    assert.equal(sample(b1, 'svc_replica_hosts', { stream: 'here' }), 0);
    assert.equal(sample(b1, 'svc_replica_hosts', { stream: 'elsewhere' }), 1);
    // The host's location went out when its stream reached A.
    assert.ok(sent(a1, 'up') >= 1 && received(b1, 'up') >= 1);
  });
});
