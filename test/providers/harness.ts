// Shared steps of the provider suites: connect a target, make a target sandbox, exec, move files,
// and read deployments, all through the public API.
import assert from 'node:assert/strict';
import { finished as finishedWithin } from '../orchestrator/harness.ts';
import { FakeSandboxA } from '../support/fakes/sandbox-a.ts';
import { FakeSandboxB } from '../support/fakes/sandbox-b.ts';
import { BUSYBOX_IMAGE } from '../support/images.ts';
import { type DialectName, startTestServer, type TestServer } from '../support/server.ts';

export { tarOf, untar } from '../support/tar.ts';

export async function connectTarget(t: TestServer, body: object) {
  const r = await t.req('POST', '/v1/targets/connect', { body });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return r.body as { cloud: any; host: any; info: any; capabilities: any };
}

/** Provider deploys start real containers (and svcd): give them minutes, not seconds. */
export const finished = (t: TestServer, depId: string, timeoutMs = 300_000) =>
  finishedWithin(t, depId, timeoutMs);

export const phase = (phases: any[], name: string) => phases.find((p) => p.Name === name);

export async function exec(t: TestServer, env: string, cmd: string[], service = 'main') {
  const r = await t.req('POST', `/v1/envs/${env}/exec`, { body: { service, cmd } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exit_code: number; stdout: string; stderr: string };
}

export async function putFiles(t: TestServer, env: string, path: string, body: Buffer, service = 'main') {
  const r = await fetch(`${t.url}/v1/envs/${env}/files?service=${service}&path=${encodeURIComponent(path)}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/x-tar' },
    body,
  });
  return { status: r.status, body: await r.json() };
}

export async function getFiles(t: TestServer, env: string, path: string, service = 'main') {
  const r = await fetch(`${t.url}/v1/envs/${env}/files?service=${service}&path=${encodeURIComponent(path)}`, {
    headers: { authorization: `Bearer ${t.key}` },
  });
  const data = Buffer.from(await r.arrayBuffer());
  return { status: r.status, data };
}

/** The image sandboxes' single service is named after the image form's rule; read it back. */
export async function serviceOf(t: TestServer, envId: string): Promise<string> {
  const env = (await t.req('GET', `/v1/envs/${envId}`)).body.environment;
  const v = (await t.req('GET', `/v1/envs/${envId}/versions`)).body.versions.find(
    (x: any) => x.ID === env.CurrentVersionID,
  );
  return v.Spec.services[0].name;
}

/** A control plane with both sandbox fakes listening (no target connected yet). */
export async function serverWithFakes(dialect: DialectName) {
  const [a, b] = await Promise.all([new FakeSandboxA().listen(), new FakeSandboxB().listen()]);
  const t = await startTestServer(dialect);
  return {
    t,
    a,
    b,
    close: async () => {
      await t.close();
      await a.close();
      await b.close();
    },
  };
}

/**
 * On a team whose only host is `provider`'s driver host: verify of an agent stack is refused in
 * the spec's wording, and a three-service stack fails at prepare with the multi-service message.
 */
export async function refusesVerifyAndMultiService(t: TestServer, provider: string): Promise<void> {
  await t.req('POST', '/v1/projects', { body: { name: 'agents' } });
  const compose = `services:
  main:
    image: ${BUSYBOX_IMAGE}
    user: "1000:1000"
    command: ["sleep", "100000"]
x-svc.agent.service: main
x-svc.verifier: { image: ${BUSYBOX_IMAGE}, command: ["true"], collect: [/tmp], timeout_sec: 10 }
`;
  const d = await t.req('POST', '/v1/projects/agents/deploy', { body: { compose } });
  const dep = await finished(t, d.body.deployment.ID);
  assert.equal(dep.deployment.Status, 'succeeded', dep.deployment.Error);
  const v = await t.req('POST', `/v1/envs/${dep.deployment.EnvID}/verify`, { body: {} });
  const ver = await finished(t, v.body.deployment.ID);
  assert.equal(
    ver.deployment.Error,
    `collect: ${provider}: verify.collect: not supported on ${provider} yet`,
  );
  const x = await t.req('DELETE', `/v1/envs/${dep.deployment.EnvID}`);
  assert.equal((await finished(t, x.body.deployment.ID)).deployment.Status, 'succeeded');
  const multi = `services:\n  a: { image: ${BUSYBOX_IMAGE} }\n  b: { image: ${BUSYBOX_IMAGE} }\n  c: { image: ${BUSYBOX_IMAGE} }\n`;
  const m = await t.req('POST', '/v1/projects/agents/deploy', { body: { compose: multi, env: 'multi' } });
  assert.equal(
    (await finished(t, m.body.deployment.ID)).deployment.Error,
    `prepare: ${provider} runs one container per environment; use your machines for multi-service stacks (3 services declared)`,
  );
}
