// Faults, on real Docker with the real svc-server and svcd programs. For each
// command kind, the command is stopped in its middle (its handler has done its work, its result is
// neither stored nor sent: the sidecar's test hold hook) and one fault is injected there:
//   - sidecar: svcd is SIGKILLed and started again (it finishes what the crash cut off);
//   - restart: svc-server is SIGKILLed and started again on the same database;
//   - drop:    the sidecar's stream is cut (both TCP halves, no close handshake).
// Afterwards (faults-checks.ts): no deployment left running, every command answered exactly once,
// no orphan container, network or dataset, and every environment usable or cleanly failed.
// One stack is shared by every case; each case leaves it settled for the next.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import tar from 'tar-stream';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { checkInvariants, settle } from './faults-checks.ts';
import { FaultStack, type Res, until } from './faults-stack.ts';

const IDLE = `["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]`;
const COMPOSE = `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    user: "1000:1000"
    command: ${IDLE}
    volumes: [work:/work]
  side:
    image: ${BUSYBOX_IMAGE}
    command: ${IDLE}
    volumes: [work:/work]
volumes: {work: {}}
x-svc.agent.service: main
x-svc.verifier:
  image: ${BUSYBOX_IMAGE}
  command: ["sh", "-c", "echo 1 > /logs/verifier/reward.txt"]
  collect: [/work]
  timeout_sec: 60
`;

type Fault = 'sidecar' | 'restart' | 'drop';

/** What a case started: a deployment to wait for, or a request (exec, files) still in flight. */
interface Started {
  deployment?: string;
  request?: Promise<Res | Error>;
}

interface Case {
  kind: string;
  /** Work done before the hook is armed (not under the fault). */
  prepare?: () => Promise<string>;
  start(prepared: string): Promise<Started>;
}

async function tarOf(name: string, content: string): Promise<Buffer> {
  const p = tar.pack();
  p.entry({ name, mode: 0o644 }, content);
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('faults: SIGKILL the sidecar, restart the control plane, drop the stream', {
  skip: tier('docker'),
}, () => {
  const s = new FaultStack();
  let base = '';
  let v1 = '';
  let n = 0;

  const accepted = async (r: Promise<Res>): Promise<Started> => {
    const res = await r;
    assert.equal(res.status, 202, JSON.stringify(res.body));
    return { deployment: res.body.deployment.ID };
  };
  const inFlight = (r: Promise<Res>): Started => ({ request: r.catch((err: Error) => err) });
  const waitDeployment = async (id: string) =>
    until(async () => {
      const r = await s.req('GET', `/v1/deployments/${id}`).catch(() => null);
      return r?.body.deployment?.FinishedAt ? r.body : null;
    }, `deployment ${id} to finish`);
  const fork = async () => {
    const f = await accepted(s.req('POST', `/v1/envs/${base}/fork`, { name: `f${++n}` }));
    const out = await waitDeployment(f.deployment as string);
    assert.equal(out.deployment.Status, 'succeeded', out.deployment.Error);
    return out.deployment.EnvID as string;
  };

  const cases: Case[] = [
    {
      kind: 'env.create',
      start: async () => {
        const name = `c${++n}`;
        assert.equal((await s.req('POST', '/v1/projects', { name })).status, 201);
        return accepted(s.req('POST', `/v1/projects/${name}/deploy`, { compose: COMPOSE }));
      },
    },
    { kind: 'env.fork', start: () => accepted(s.req('POST', `/v1/envs/${base}/fork`, { name: `f${++n}` })) },
    { kind: 'env.snapshot', start: () => accepted(s.req('POST', `/v1/envs/${base}/snapshot`)) },
    // Inside the handler, with every container frozen for the capture.
    { kind: 'env.snapshot:frozen', start: () => accepted(s.req('POST', `/v1/envs/${base}/snapshot`)) },
    {
      kind: 'env.rollback',
      start: () => accepted(s.req('POST', `/v1/envs/${base}/rollback`, { version: v1 })),
    },
    {
      kind: 'env.exec',
      start: async () =>
        inFlight(s.req('POST', `/v1/envs/${base}/exec`, { service: 'side', cmd: ['touch', '/work/x'] })),
    },
    {
      kind: 'env.put',
      start: async () =>
        inFlight(
          s.req(
            'PUT',
            `/v1/envs/${base}/files?service=side&path=/work`,
            undefined,
            await tarOf('in.txt', 'hi'),
          ),
        ),
    },
    {
      kind: 'env.get',
      start: async () => inFlight(s.req('GET', `/v1/envs/${base}/files?service=side&path=/work`)),
    },
    // The agent (main) stays frozen after a verify (spec): exec, files and checks use `side`.
    { kind: 'verify.collect', start: () => accepted(s.req('POST', `/v1/envs/${base}/verify`, {})) },
    { kind: 'verify.run', start: () => accepted(s.req('POST', `/v1/envs/${base}/verify`, {})) },
    { kind: 'env.destroy', prepare: fork, start: (env) => accepted(s.req('DELETE', `/v1/envs/${env}`)) },
  ];

  /** Injects the fault while the command is held, and lets the stack go on afterwards. */
  async function inject(fault: Fault): Promise<void> {
    if (fault === 'sidecar') {
      await s.killSidecar();
      await s.startSidecar();
      return;
    }
    if (fault === 'restart') {
      const from = s.sidecarLog.length;
      await s.killServer();
      await s.startServer();
      await s.reconnected(from);
    } else {
      await s.reconnected(s.dropStream());
    }
    s.release();
  }

  before(async () => {
    await ensureTestImages();
    await s.start();
    assert.equal((await s.req('POST', '/v1/projects', { name: 'base' })).status, 201);
    const d = await accepted(s.req('POST', '/v1/projects/base/deploy', { compose: COMPOSE }));
    const out = await waitDeployment(d.deployment as string);
    assert.equal(out.deployment.Status, 'succeeded', out.deployment.Error);
    base = out.deployment.EnvID;
    v1 = out.deployment.VersionID;
  });
  after(async () => {
    s.release();
    await settle(s).catch(() => {});
    for (const e of s.query<{ id: string }>("SELECT id FROM environments WHERE status = 'running'")) {
      const r = await s.req('DELETE', `/v1/envs/${e.id}`).catch(() => null);
      if (r?.status === 202) await waitDeployment(r.body.deployment.ID).catch(() => {});
    }
    await s.close();
  });

  for (const fault of ['sidecar', 'restart', 'drop'] as const) {
    for (const c of cases) {
      test(`${fault} during ${c.kind}`, async () => {
        const prepared = c.prepare ? await c.prepare() : '';
        const from = s.hold(c.kind);
        const started = await c.start(prepared);
        const commandId = await s.held(c.kind, from);
        await inject(fault);
        if (started.request) {
          const r = await started.request;
          // The request saw the fault: a 502, or its connection went with the control plane.
          if (!(r instanceof Error)) assert.equal(r.status, 502, JSON.stringify(r.body));
        }
        if (started.deployment) {
          const out = await waitDeployment(started.deployment);
          assert.notEqual(out.deployment.Status, 'succeeded', 'the fault did not reach the deployment');
          assert.ok(out.deployment.Error, 'a failed deployment says why');
        }
        const row = s.query<{ status: string }>('SELECT status FROM commands WHERE id = ?', commandId);
        assert.deepEqual(
          row.map((r) => r.status),
          ['failed'],
        );
        await checkInvariants(s, 'side');
      });
    }
  }
});
