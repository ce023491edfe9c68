// Spec "Targets, placement and drivers": a multi-service spec sent to a hosted provider fails at
// `prepare` with `<provider> runs one container per environment; use your machines for
// multi-service stacks (<N> services declared)`, before the driver is asked for anything.
// A recording driver stands in for the provider so the test sees exactly what reached it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { CommandKind } from '../../protocol/commands.ts';
import type { CommandTarget, Driver } from '../../server/hosts/dispatcher.ts';
import { otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { finished, phaseTable, SIMPLE_COMPOSE } from './harness.ts';

const THREE_SERVICES = `
services:
  web: { image: busybox:latest }
  api: { image: busybox:latest }
  db: { image: postgres:16 }
`;
const ONE_SERVICE = `
services:
  main: { image: busybox:latest, command: ["sleep", "infinity"] }
`;

class RecordingDriver implements Driver {
  calls: { provider: string; kind: CommandKind; envId: string }[] = [];
  async run(target: CommandTarget, envId: string, kind: CommandKind, payload: unknown): Promise<unknown> {
    this.calls.push({ provider: target.kind, kind, envId });
    if (kind === 'env.create') return { endpoints: {}, started_in: 3, digests: {}, storage: 'provider' };
    if (kind === 'env.snapshot') {
      const name = (payload as { name: string }).name;
      return { snapshot: name, datasets: ['sandbox'], frozen_for: 1, consistent: true };
    }
    throw new Error(`${kind}: not expected in this test`);
  }
}

/** `finished` for a deployment of another team (its own key). */
async function finishedAs(t: TestServer, depId: string, token: string) {
  for (;;) {
    const r = await t.req('GET', `/v1/deployments/${depId}`, { token });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    if (r.body.deployment.FinishedAt) return r.body as { deployment: any; phases: any[] };
    await new Promise((res) => setTimeout(res, 20));
  }
}

forEachDialect('deploy to a driver host (hosted provider)', (dialect) => {
  let t: TestServer;
  const driver = new RecordingDriver();
  before(async () => {
    t = await startTestServer(
      dialect,
      { SVC_DEV_LOGIN: '1' },
      {
        orchestrator: {
          drivers: new Map([
            ['sandbox-a', driver],
            ['sandbox-b', driver],
          ]),
        },
      },
    );
  });
  after(async () => t.close());

  for (const provider of ['sandbox-a', 'sandbox-b']) {
    test(`${provider}: a multi-service spec fails at prepare with the spec's message`, async () => {
      // A team of its own whose only host is the provider's driver host: placement picks it.
      const team = await otherTeam(t, `${provider}@example.com`);
      const req = (path: string, body: object) => t.req('POST', path, { body, token: team.key });
      const cloud = await req('/v1/clouds', { provider, config: { token: 't' } });
      assert.equal(cloud.status, 201, JSON.stringify(cloud.body));
      assert.equal((await req('/v1/projects', { name: 'multi' })).status, 201);
      for (const [compose, n] of [
        [SIMPLE_COMPOSE, 2],
        [THREE_SERVICES, 3],
      ] as const) {
        const r = await req('/v1/projects/multi/deploy', { compose });
        assert.equal(r.status, 202, JSON.stringify(r.body));
        const { deployment, phases } = await finishedAs(t, r.body.deployment.ID, team.key);
        assert.equal(deployment.Status, 'failed');
        assert.equal(
          deployment.Error,
          `prepare: ${provider} runs one container per environment; use your machines for multi-service stacks (${n} services declared)`,
        );
        assert.deepEqual(phaseTable(phases).slice(0, 5), [
          ['resolve', 'ok'],
          ['place', 'ok'],
          ['provision', 'skipped'],
          ['join', 'skipped'],
          ['prepare', 'failed'],
        ]);
        assert.equal(phases[1].Evidence.reason, 'first connected host in team');
      }
      const created = await t.server.ctx.db.all<{ kind: string }>(
        "SELECT kind FROM commands WHERE team_id = ? AND kind = 'env.create'",
        [team.teamId],
      );
      assert.equal(created.length, 0, 'no env.create was recorded');
      assert.deepEqual(
        driver.calls.filter((c) => c.provider === `driver:${provider}`),
        [],
        'the driver was never asked for anything',
      );
    });
  }

  test('a one-service spec still reaches the driver at prepare', async () => {
    const cloud = await t.req('POST', '/v1/clouds', {
      body: { provider: 'sandbox-a', name: 'single', config: { token: 't' } },
    });
    assert.equal(cloud.status, 201, JSON.stringify(cloud.body));
    assert.equal((await t.req('POST', '/v1/projects', { body: { name: 'single' } })).status, 201);
    const r = await t.req('POST', '/v1/projects/single/deploy', { body: { compose: ONE_SERVICE } });
    const { deployment } = await finished(t, r.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    assert.deepEqual(
      driver.calls.filter((c) => c.envId === deployment.EnvID).map((c) => [c.provider, c.kind]),
      [
        ['driver:sandbox-a', 'env.create'],
        ['driver:sandbox-a', 'env.snapshot'],
      ],
    );
  });
});
