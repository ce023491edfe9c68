// Three real svc-server replicas on one Postgres behind a real HAProxy with the repository's own
// configuration (release/ha/haproxy.cfg): any replica answers; a replica told to stop (SIGTERM)
// drains out of rotation without one request failing; a replica killed outright costs at most the
// request it was answering, and the others go on.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Cluster, startCluster } from '../support/ha.ts';
import { tier } from '../support/tiers.ts';

const skip = tier('postgres') || tier('haproxy');

describe('replicas behind HAProxy', { skip }, () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster(3, { SVC_DRAIN_SECONDS: '3' });
    await c.waitUp(['r1', 'r2', 'r3']);
  });
  after(async () => {
    await c?.close();
  });

  const get = (path: string) =>
    fetch(`${c.url}${path}`, { headers: { authorization: `Bearer ${c.key}` } }).then(
      async (r) => ({ status: r.status, body: await r.text() }),
      (err: Error) => ({ status: 0, body: err.message }),
    );

  /** Sends requests one after another until `until` resolves; every answer's status. */
  async function steadyLoad(until: Promise<unknown>): Promise<number[]> {
    let done = false;
    until.finally(() => {
      done = true;
    });
    const statuses: number[] = [];
    while (!done) statuses.push((await get('/v1/projects')).status);
    return statuses;
  }

  test('any replica answers any request: all three serve', async () => {
    const before = await c.servers();
    // A new connection per request (leastconn spreads them); keep-alive would pin one replica.
    for (let i = 0; i < 30; i++) {
      const r = await fetch(`${c.url}/v1/projects`, {
        headers: { authorization: `Bearer ${c.key}`, connection: 'close' },
      });
      assert.equal(r.status, 200);
      await r.text();
    }
    const after = await c.servers();
    for (const name of ['r1', 'r2', 'r3'])
      assert.ok(after.get(name)!.sessions > before.get(name)!.sessions, `${name} served some`);
    const e2b = await fetch(`${c.e2bUrl}/sandboxes`, { headers: { 'x-api-key': c.key } });
    assert.equal(e2b.status, 200, 'the E2B listener is balanced too');
  });

  test("one sandbox's envd calls reach one replica; calls for other sandboxes spread", async () => {
    const sessions = async () =>
      new Map([...(await c.servers('replicas_e2b'))].map(([k, v]) => [k, v.sessions]));
    const call = async (sandbox: string) => {
      const r = await fetch(`${c.e2bUrl}/health`, {
        headers: { 'e2b-sandbox-id': sandbox, connection: 'close' },
      });
      await r.text();
      return r.status;
    };
    let before = await sessions();
    for (let i = 0; i < 12; i++) assert.notEqual(await call('sbx_one'), 0);
    let after = await sessions();
    const served = [...after].filter(([k, n]) => n > (before.get(k) ?? 0)).map(([k]) => k);
    assert.equal(served.length, 1, `one sandbox's calls went to ${served.join(', ')}`);
    before = after;
    for (let i = 0; i < 30; i++) await call(`sbx_${i}`);
    after = await sessions();
    assert.ok([...after].filter(([k, n]) => n > (before.get(k) ?? 0)).length > 1, 'other sandboxes spread');
  });

  test('SIGTERM: the replica drains out of rotation and no request fails', async () => {
    const r1 = c.replicas[0];
    const exited = r1.exited;
    const loading = steadyLoad(c.waitUp(['r2', 'r3']).then(() => exited));
    r1.proc.kill('SIGTERM');
    const statuses = await loading;
    assert.equal(await exited, 0, r1.stderr());
    assert.ok(statuses.length > 0);
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
      `${statuses.length} requests during the drain, every one answered`,
    );
  });

  test('SIGKILL: at most the request in flight is lost; the last replica answers the rest', async () => {
    const r2 = c.replicas[1];
    const loading = steadyLoad(c.waitUp(['r3']));
    r2.proc.kill('SIGKILL');
    const statuses = await loading;
    const failed = statuses.filter((s) => s !== 200);
    assert.ok(failed.length <= 1, `failed: ${failed} of ${statuses.length}`);
    for (let i = 0; i < 10; i++) assert.equal((await get('/v1/projects')).status, 200);
    assert.equal(c.replicas[2].proc.exitCode, null, 'the surviving replica runs');
  });
});
