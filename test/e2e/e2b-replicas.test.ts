// The E2B surface with two control-plane replicas on one Postgres (the balancer may send each of
// an SDK's calls to either): a background command started through one replica is connected to,
// listed and killed through the other, by the pid the first handed out. Real `e2b` SDK, real svcd
// on Docker.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CommandExitError, Sandbox } from 'e2b';
import { ensureTestImages, PGREDIS_IMAGE } from '../support/images.ts';
import { startReplica, type TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { type Real, startReal } from './real.ts';

describe('E2B SDK across two replicas', { skip: tier('docker') || tier('postgres') }, () => {
  let r: Real;
  let b: TestServer;
  let s: Sandbox;
  const opts = (url: string) => ({
    apiUrl: url,
    sandboxUrl: url,
    apiKey: r.t.key,
    requestTimeoutMs: 300_000,
  });
  before(async () => {
    await ensureTestImages({ postgres: true });
    r = await startReal({ dialect: 'postgres', env: { SVC_E2B_ADDR: '127.0.0.1:0' } });
    b = await startReplica(r.t, { SVC_E2B_ADDR: '127.0.0.1:0' });
    s = await Sandbox.create(PGREDIS_IMAGE, opts(r.t.server.e2b?.url ?? ''));
  });
  after(async () => {
    await s?.kill().catch(() => {});
    await b?.close();
    await r?.close();
  });

  test('a command started through A is connected to, listed and killed through B by its pid', async () => {
    // Two, so the second's pid is not the first number a fresh table would hand out.
    const one = await s.commands.run('sleep 600', { background: true });
    const two = await s.commands.run('echo started; sleep 600', { background: true });
    assert.notEqual(one.pid, two.pid);
    const viaB = await Sandbox.connect(s.sandboxId, opts(b.server.e2b?.url ?? ''));
    const again = await viaB.commands.connect(two.pid);
    const listed = await viaB.commands.list();
    assert.deepEqual(
      listed.map((p) => [p.pid, p.args.join(' ')]).sort(),
      [
        [one.pid, '-l -c sleep 600'],
        [two.pid, '-l -c echo started; sleep 600'],
      ].sort(),
    );
    assert.equal(await viaB.commands.kill(two.pid), true);
    await assert.rejects(again.wait(), CommandExitError);
    await assert.rejects(two.wait(), CommandExitError);
    // Back on A, the same numbers: the killed one is gone, the other still listed.
    assert.deepEqual(
      (await s.commands.list()).map((p) => p.pid),
      [one.pid],
    );
    assert.equal(await s.commands.kill(one.pid), true);
  });
});
