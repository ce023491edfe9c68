// The honest half of the soak: what tenants do all day, through the public API on real Docker.
// Each operation records its answers; an operation that starts a deployment waits for it to end
// (bounded) and records how it ended, then destroys what it created, so the host's load stays
// level over a long run.
import { gzipSync } from 'node:zlib';
import { agentStack, IDLE_COMMAND } from '../../test/e2e/real.ts';
import { archive } from '../../test/hardening/support/tar-gen.ts';
import { BUSYBOX_IMAGE } from '../../test/support/images.ts';
import {
  installationCreated,
  payload,
  pushPayload,
  sendWebhook,
  WEBHOOK_SECRET,
} from '../../test/support/webhooks.ts';
import { type Answer, type Client, sleep } from './http.ts';
import type { Recorder } from './record.ts';

/** A deployment not finished within this is reported stuck. */
export const DEPLOY_BOUND_MS = 10 * 60_000;

const STACK = `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
    volumes: [work:/work]
    healthcheck: {test: ["CMD", "test", "-d", "/work"], interval: 30s}
volumes:
  work: {}
`;

const CONTEXT_STACK = `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE_COMMAND}
    volumes: ["./ctx.txt:/ctx.txt:ro"]
`;

const AGENT = agentStack(
  BUSYBOX_IMAGE,
  `x-svc.verifier:
  image: ${BUSYBOX_IMAGE}
  command: ["sh", "-c", "if [ \\"$$(cat /submission/work/answer)\\" = 42 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt"]
  collect: [/work]
  timeout_sec: 60
`,
);

/** A plain tar of one file of `bytes` bytes (the hardening suites' block writer, honest headers). */
export function tarOf(name: string, bytes: number): Buffer {
  return archive([{ name, type: '0', size: bytes, body: bytes, linkname: '', prefix: '' }], true);
}

export interface Stage {
  /** The long-lived environment of the plain stack: exec, files and forks go to it. */
  base: string;
  /** Its version, kept warm in a pool of one. */
  version: string;
  /** The agent environment that verify grades. */
  agent: string;
}

let serial = 0;
const next = () => `${Date.now().toString(36)}${(serial++).toString(36)}`;

export class Work {
  readonly c: Client;
  readonly rec: Recorder;

  constructor(c: Client, rec: Recorder) {
    this.c = c;
    this.rec = rec;
  }

  async #call(
    op: string,
    method: string,
    path: string,
    o: Parameters<Client['call']>[2] = {},
  ): Promise<Answer> {
    const a = await this.c.call(method, path, o);
    this.rec.add(op, 'work', a);
    return a;
  }

  /** Waits for a deployment to end; records `<op>.end` as ok when it succeeded. */
  async finish(op: string, id: string): Promise<any> {
    const t0 = Date.now();
    for (;;) {
      const a = await this.c.call('GET', `/v1/deployments/${id}`);
      if (a.status >= 500 || (a.status >= 400 && a.status !== 429)) this.rec.add('deployment.get', 'work', a);
      const d = a.body?.deployment;
      if (d?.FinishedAt) {
        const ok = d.Status === 'succeeded';
        this.rec.note(
          `${op}.end`,
          'work',
          ok ? 'ok' : 'unexpected-other',
          Date.now() - t0,
          `${d.Status} ${id} ${d.Error ?? ''}`,
        );
        return ok ? a.body : null;
      }
      if (Date.now() - t0 > DEPLOY_BOUND_MS) {
        this.rec.note(
          `${op}.end`,
          'work',
          'unexpected-timeout',
          Date.now() - t0,
          `stuck ${id} ${a.text.slice(0, 300)}`,
        );
        return null;
      }
      await sleep(500);
    }
  }

  async #started(op: string, a: Answer): Promise<any> {
    const id = a.body?.deployment?.ID;
    return a.status === 202 || a.status === 201 ? (id ? this.finish(op, id) : null) : null;
  }

  #why(): string {
    return this.rec
      .summary()
      .flatMap((o) => o.examples)
      .join('\n');
  }

  async destroy(env: string): Promise<void> {
    const a = await this.#call('destroy', 'DELETE', `/v1/envs/${env}`);
    if (a.status === 202) await this.finish('destroy', a.body.deployment.ID);
  }

  async setup(): Promise<Stage> {
    for (const [name, kind] of [
      ['soak', undefined],
      ['soak-agent', 'agent'],
      ['soak-ctx', undefined],
    ] as const) {
      const a = await this.#call('setup', 'POST', '/v1/projects', {
        body: { name, ...(kind ? { kind } : {}) },
      });
      if (a.status !== 201) throw new Error(`create project ${name}: ${a.status} ${a.text}`);
    }
    const base = await this.#started(
      'deploy',
      await this.#call('deploy', 'POST', '/v1/projects/soak/deploy', { body: { compose: STACK } }),
    );
    if (!base) throw new Error(`the base deploy failed: ${this.#why()}`);
    const agent = await this.#started(
      'deploy',
      await this.#call('deploy', 'POST', '/v1/projects/soak-agent/deploy', { body: { compose: AGENT } }),
    );
    if (!agent) throw new Error(`the agent deploy failed: ${this.#why()}`);
    const stage = {
      base: base.deployment.EnvID,
      version: base.deployment.VersionID,
      agent: agent.deployment.EnvID,
    };
    await this.#call('pool.set', 'POST', `/v1/versions/${stage.version}/pool`, { body: { size: 1 } });
    await this.#call('exec', 'POST', `/v1/envs/${stage.agent}/exec`, {
      body: { service: 'main', cmd: ['sh', '-c', 'echo 42 > /work/answer'], timeout_sec: 60 },
    });
    return stage;
  }

  /** The operations and their weights; `run` picks among them. */
  ops(s: Stage): [string, number, () => Promise<unknown>][] {
    return [
      ['exec', 8, () => this.exec(s.base)],
      ['files', 4, () => this.files(s.base)],
      ['deploy', 2, () => this.deployEnv()],
      ['fork', 2, () => this.fork(s.base)],
      ['verify', 1, () => this.verify(s.agent)],
      ['claim', 1, () => this.claim(s.version)],
      ['upload', 2, () => this.upload()],
      ['webhook', 3, () => this.webhook()],
      ['read', 4, () => this.read(s.base)],
    ];
  }

  async exec(env: string) {
    await this.#call('exec', 'POST', `/v1/envs/${env}/exec`, {
      body: { service: 'main', cmd: ['sh', '-c', 'echo soak; ls /work >/dev/null'], timeout_sec: 60 },
    });
  }

  async files(env: string) {
    const name = `soak-${next()}.txt`;
    await this.#call('files.put', 'PUT', `/v1/envs/${env}/files?service=main&path=/work`, {
      raw: tarOf(name, 4096),
      headers: { 'content-type': 'application/x-tar' },
    });
    await this.#call(
      'files.get',
      'GET',
      `/v1/envs/${env}/files?service=main&path=${encodeURIComponent(`/work/${name}`)}`,
    );
    await this.#call('exec', 'POST', `/v1/envs/${env}/exec`, {
      body: { service: 'main', cmd: ['rm', '-f', `/work/${name}`] },
    });
  }

  async deployEnv() {
    const d = await this.#started(
      'deploy',
      await this.#call('deploy', 'POST', '/v1/projects/soak/deploy', {
        body: { compose: STACK, env: `d-${next()}` },
      }),
    );
    if (d) await this.destroy(d.deployment.EnvID);
  }

  async fork(env: string) {
    const a = await this.#call('fork', 'POST', `/v1/envs/${env}/fork`, { body: { name: `f-${next()}` } });
    const d = await this.#started('fork', a);
    const forked = d?.deployment?.TargetEnvID || a.body?.deployment?.TargetEnvID;
    if (d && forked) await this.exec(forked);
    if (forked) await this.destroy(forked);
  }

  async verify(env: string) {
    await this.#started(
      'verify',
      await this.#call('verify', 'POST', `/v1/envs/${env}/verify`, { body: { resume: true } }),
    );
  }

  async claim(version: string) {
    const a = await this.#call('claim', 'POST', '/v1/sandboxes', {
      body: { from_version: version, name: `c-${next()}` },
    });
    const env = a.body?.environment?.ID;
    const d = await this.#started('claim', a);
    if (d && env) await this.exec(env);
    if (env) await this.destroy(env);
  }

  async upload() {
    const a = await this.#call('upload', 'PUT', '/v1/uploads', {
      raw: gzipSync(tarOf('ctx.txt', 2048)),
      headers: { 'content-type': 'application/gzip' },
    });
    if (a.status !== 201 || Math.random() < 0.5) return;
    const d = await this.#started(
      'deploy.context',
      await this.#call('deploy.context', 'POST', '/v1/projects/soak-ctx/deploy', {
        body: { compose: CONTEXT_STACK, context: a.body.upload, env: `u-${next()}` },
      }),
    );
    if (d) await this.destroy(d.deployment.EnvID);
  }

  async webhook() {
    const n = Math.floor(Math.random() * 3);
    const body =
      n === 0
        ? payload('octokit__ping__payload.json')
        : n === 1
          ? installationCreated(100_000 + serial++, `soak-org-${serial}`)
          : pushPayload('nobody/unlinked', 'main', 'f'.repeat(40), 424242);
    const event = ['ping', 'installation', 'push'][n];
    const t0 = performance.now();
    const r = await sendWebhook(this.c, event, body, { secret: WEBHOOK_SECRET });
    this.rec.add(`webhook.${event}`, 'work', {
      status: r.status,
      body: r.body,
      text: JSON.stringify(r.body ?? ''),
      ms: performance.now() - t0,
      error: r.status ? null : 'network',
    });
  }

  async read(env: string) {
    await this.#call('read', 'GET', `/v1/envs/${env}`);
    await this.#call('read', 'GET', `/v1/events?subject=env:${env}`);
    await this.#call('read', 'GET', '/v1/hosts');
  }
}
