// Shared set-up for orchestrator tests: a real control plane (SQLite or Postgres), a fake
// sidecar joined through the real join-token route, and helpers to drive deployments.
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import type { StartOptions } from '../../server/main.ts';
import { FakeSidecar } from '../support/fake-sidecar.ts';
import { type DialectName, startTestServer, type TestServer } from '../support/server.ts';

export const SIMPLE_COMPOSE = `
services:
  app:
    image: busybox:latest
    command: ["sleep", "infinity"]
    volumes: [data:/data]
  db:
    image: postgres:16
    volumes: [pg:/var/lib/postgresql/data]
volumes: { data: {}, pg: {} }
`;

export const AGENT_COMPOSE = `
services:
  main:
    image: debian:bookworm-slim
    user: "1000:1000"
    command: ["sleep", "infinity"]
    volumes: [work:/work]
volumes: { work: {} }
x-svc.agent.service: main
x-svc.verifier:
  image: debian:bookworm-slim
  command: ["sh", "-c", "echo 1 > /logs/verifier/reward.txt"]
  collect: [/work]
  timeout_sec: 60
`;

export interface World {
  t: TestServer;
  sc: FakeSidecar;
  project: string;
  alpha: string;
}

export async function joinFake(t: TestServer): Promise<FakeSidecar> {
  const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
  assert.equal(jt.status, 201, JSON.stringify(jt.body));
  return new FakeSidecar(t.url).connect(jt.body.token);
}

export async function world(
  dialect: DialectName,
  opts: StartOptions = {},
  projectName = 'p1',
  env: Record<string, string> = {},
): Promise<World> {
  const t = await startTestServer(dialect, env, opts);
  const sc = await joinFake(t);
  const p = await t.req('POST', '/v1/projects', { body: { name: projectName } });
  assert.equal(p.status, 201, JSON.stringify(p.body));
  return { t, sc, project: p.body.project.ID, alpha: p.body.environments[0].ID };
}

/** Inside a describe: a world made before the tests and closed after them. */
export function usingWorld(dialect: DialectName): () => World {
  let w: World | undefined;
  before(async () => {
    w = await world(dialect);
  });
  after(async () => {
    await w?.sc.close();
    await w?.t.close();
  });
  return () => w as World;
}

export async function finished(t: TestServer, depId: string, timeoutMs = 20_000) {
  const start = Date.now();
  for (;;) {
    const r = await t.req('GET', `/v1/deployments/${depId}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    if (r.body.deployment.FinishedAt) return r.body as { deployment: any; phases: any[] };
    if (Date.now() - start > timeoutMs)
      throw new Error(`deployment ${depId} did not finish: ${JSON.stringify(r.body)}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

export async function deploy(w: World, compose = SIMPLE_COMPOSE, extra: Record<string, unknown> = {}) {
  const r = await w.t.req('POST', `/v1/projects/${w.project}/deploy`, { body: { compose, ...extra } });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  return finished(w.t, r.body.deployment.ID);
}

export const phaseTable = (phases: any[]) => phases.map((p) => [p.Name, p.Status]);
export const evidenceKeys = (phases: any[], name: string) =>
  Object.keys(phases.find((p) => p.Name === name)?.Evidence ?? {}).sort();

export async function env(t: TestServer, id: string) {
  const r = await t.req('GET', `/v1/envs/${id}`);
  assert.equal(r.status, 200);
  return r.body.environment;
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
) {
  const start = Date.now();
  while (!(await cond())) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
