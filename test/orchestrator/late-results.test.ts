// A command the control plane gave up on (its stream dropped) may still succeed on the host and
// answer later (spec "Command lifecycle" 6). A late env.create for an environment already failed
// must not leave its stack behind: the control plane removes it (env.destroy).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { frame } from '../../protocol/frames.ts';
import { forEachDialect } from '../support/server.ts';
import { env, finished, SIMPLE_COMPOSE, type World, waitFor, world } from './harness.ts';

forEachDialect('late results', (dialect) => {
  let w: World;
  before(async () => {
    w = await world(dialect);
  });
  after(async () => {
    await w.sc.close().catch(() => {});
    await w.t.close();
  });

  test('a first create that succeeds after its deployment failed is destroyed on the host', async () => {
    w.sc.answer = false;
    const r = await w.t.req('POST', `/v1/projects/${w.project}/deploy`, {
      body: { compose: SIMPLE_COMPOSE },
    });
    const create = await w.sc.nextCommand('env.create');
    w.sc.kill();
    const { deployment } = await finished(w.t, r.body.deployment.ID);
    assert.equal(deployment.Error, 'prepare: env.create: host disconnected');
    assert.equal((await env(w.t, w.alpha)).Status, 'failed');
    w.sc.answer = true;
    await w.sc.connect();
    await waitFor(() => w.t.server.orchestrator.hub.isConnected(w.sc.hostId));
    const payload = {
      endpoints: {},
      started_in: 1,
      digests: {},
      storage: 'dir',
      egress: 'denied (verified)',
    };
    w.sc.send(frame('result', { command_id: create.command_id, host_id: w.sc.hostId, ok: true, payload }));
    await waitFor(() => w.sc.commands('env.destroy').length > 0, 10_000, 'an env.destroy');
    assert.deepEqual(
      w.sc.commands('env.destroy').map((c) => c.env_id),
      [w.alpha],
    );
    // The late result changed nothing on the command row: it keeps its one outcome.
    const row = await w.t.server.ctx.db.get<{ status: string }>('SELECT status FROM commands WHERE id = ?', [
      create.command_id as string,
    ]);
    assert.equal(row?.status, 'failed');
  });
});
