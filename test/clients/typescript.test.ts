// The TypeScript client (clients/typescript): its generated types are those of the running server's
// /openapi.json (never stale), and it works against the real server with a fake sidecar: typed
// requests and answers, every failure a SvcError with the status and the server's message.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { generateSchema, SCHEMA_FILE } from '../../clients/typescript/generate.ts';
import { createSvcClient, ok, type SvcClient, SvcError } from '../../clients/typescript/src/index.ts';
import { type CliWorld, cliWorld } from '../cli/harness.ts';

describe('the TypeScript client', () => {
  let w: CliWorld;
  let svc: SvcClient;
  before(async () => {
    w = await cliWorld('sqlite');
    svc = createSvcClient({ server: w.t.url, apiKey: w.t.key });
  });
  after(async () => {
    await w?.close();
  });

  test('src/schema.d.ts is what openapi-typescript makes of this server (npm run generate:client)', async () => {
    assert.equal(readFileSync(SCHEMA_FILE, 'utf8'), await generateSchema());
  });

  test('typed calls: project, deploy, deployment, exec, versions', async () => {
    const created = await ok(svc.POST('/v1/projects', { body: { name: 'ts-client' } }));
    const alpha: string = created.environments[0].Name;
    assert.equal(alpha, 'alpha');
    const compose = 'services:\n  app:\n    image: busybox\n    command: ["sleep", "infinity"]\n';
    const started = await ok(
      svc.POST('/v1/projects/{project}/deploy', {
        params: { path: { project: 'ts-client' } },
        body: { compose },
      }),
    );
    const id: string = started.deployment.ID;
    let detail = await ok(svc.GET('/v1/deployments/{dep}', { params: { path: { dep: id } } }));
    while (detail.deployment.FinishedAt === null) {
      await new Promise((r) => setTimeout(r, 50));
      detail = await ok(svc.GET('/v1/deployments/{dep}', { params: { path: { dep: id } } }));
    }
    assert.equal(detail.deployment.Status, 'succeeded');
    assert.equal(detail.phases.at(-1)?.Name, 'verdict');
    const env = detail.deployment.EnvID;
    const ran = await ok(
      svc.POST('/v1/envs/{env}/exec', { params: { path: { env } }, body: { service: 'app', cmd: ['true'] } }),
    );
    const code: number = ran.exit_code;
    assert.equal(code, 0);
    const { versions } = await ok(svc.GET('/v1/envs/{env}/versions', { params: { path: { env } } }));
    assert.equal(versions[0].Healthy, true);
    // count: a typed fan-out answer, each fork or its own error.
    const fan = await ok(
      svc.POST('/v1/envs/{env}/fork', { params: { path: { env } }, body: { count: 2, name: 'ts-fan' } }),
    );
    assert.ok('forks' in fan);
    const names = fan.forks.map((f) => ('environment' in f && f.environment ? f.environment.Name : f));
    assert.deepEqual(names, ['ts-fan-1', 'ts-fan-2']);
  });

  test('failures are SvcError with the status and the server message', async () => {
    await assert.rejects(
      ok(svc.GET('/v1/envs/{env}', { params: { path: { env: 'env_missing' } } })),
      (err: unknown) => err instanceof SvcError && err.status === 404 && err.path === '/v1/envs/env_missing',
    );
    const stranger = createSvcClient({ server: w.t.url, apiKey: `dak_${'0'.repeat(32)}` });
    await assert.rejects(
      ok(stranger.GET('/v1/me')),
      (err: unknown) => err instanceof SvcError && err.status === 401 && err.message.length > 0,
    );
    await assert.rejects(
      ok(svc.POST('/v1/projects', { body: { name: 'ts-client' } })),
      (err: unknown) => err instanceof SvcError && err.status === 409,
    );
  });
});
