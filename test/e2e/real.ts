// A real control plane, a real svcd process and real Docker, for end-to-end tests. The sidecar's
// egress probe is pointed at a TCP listener on this machine's primary address, which stands for
// "the internet": an allow stack reaches it, a deny stack must not.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '../../shared/concurrency.ts';
import { releaseBridge } from '../../sidecar/docker/firewall.ts';
import { bridgeName } from '../../sidecar/docker/render.ts';
import { unmountUnder } from '../../sidecar/storage/quota.ts';
import { type DialectName, startTestServer, type TestServer } from '../support/server.ts';
import { svcdJoinArgs } from '../support/svcd.ts';

export function primaryIp(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? [])
      if (a.family === 'IPv4' && !a.internal && !/^172\.(1[6-9]|2\d|3[01])\./.test(a.address))
        return a.address;
  }
  return '127.0.0.1';
}

export interface Real {
  t: TestServer;
  dir: string;
  dataDir: string;
  /** A TCP service on the host that counts connections (the "internet" and a host service). */
  listener: { port: number; hits: number; server: Server };
  sidecar: ChildProcess;
  log(): string;
  /** Starts svcd; the first start joins with `joinToken` (default: one minted with the bootstrap key). */
  startSidecar(joinToken?: string): Promise<void>;
  killSidecar(): Promise<void>;
  close(): Promise<void>;
}

export async function startReal(
  opts: { env?: Record<string, string>; join?: boolean; dialect?: DialectName } = {},
): Promise<Real> {
  const t = await startTestServer(opts.dialect ?? 'sqlite', opts.env ?? {});
  const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-'));
  const dataDir = join(dir, 'data');
  const listener = {
    port: 0,
    hits: 0,
    server: createServer((s) => {
      listener.hits++;
      s.on('error', () => {});
      s.end('hello\n');
    }),
  };
  await new Promise<void>((r) => listener.server.listen(0, '0.0.0.0', () => r()));
  listener.port = (listener.server.address() as { port: number }).port;
  let token = '';
  let out = '';
  const real: Real = {
    t,
    dir,
    dataDir,
    listener,
    sidecar: null as unknown as ChildProcess,
    log: () => out,
    async startSidecar(joinToken?: string) {
      if (joinToken) token = joinToken;
      if (!token) {
        const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
        assert.equal(jt.status, 201);
        token = jt.body.token;
      }
      const args = svcdJoinArgs(t.url, token, dir, dataDir);
      const child = spawn(process.execPath, args, {
        env: { ...process.env, SVC_EGRESS_PROBE: `${primaryIp()}:${listener.port}` },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stderr?.on('data', (d) => (out += d));
      child.stdout?.on('data', (d) => (out += d));
      real.sidecar = child;
      const start = Date.now();
      const from = out.length;
      for (;;) {
        if (/connected to /.test(out.slice(from))) return;
        if (child.exitCode !== null || Date.now() - start > 30_000)
          throw new Error(`svcd did not connect:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async killSidecar() {
      const c = real.sidecar;
      if (c.exitCode !== null) return;
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await gone;
    },
    async close() {
      await destroyAll(t, real).catch((err) => process.stderr.write(`e2e cleanup: ${err.message}\n`));
      await real.killSidecar().catch(() => {});
      listener.server.close();
      await t.close();
      await unmountUnder(dir); // a volume file system an env that failed to destroy left mounted
      detachLoopsUnder(dir); // svcd's XFS store image: unmounting it does not detach its loop device
      rmSync(dir, { recursive: true, force: true });
    },
  };
  if (opts.join !== false) await real.startSidecar();
  return real;
}

/** Detaches loop devices whose backing file lies under `dir` (all of them this run's). */
function detachLoopsUnder(dir: string): void {
  let list = '';
  try {
    list = execFileSync('losetup', ['-a'], { encoding: 'utf8' });
  } catch {
    return; // no losetup: nothing could have been attached
  }
  for (const line of list.split('\n')) {
    if (!line.includes(`(${dir}/`)) continue;
    try {
      execFileSync('losetup', ['-d', line.slice(0, line.indexOf(':'))], { stdio: 'ignore' });
    } catch {}
  }
}

/** Docker objects left for an environment: containers, networks and volumes of its project. */
export function leftovers(envId: string): string[] {
  const project = envId.toLowerCase();
  const q = (args: string[]) =>
    execFileSync('docker', args, { encoding: 'utf8' }).split('\n').filter(Boolean);
  return [
    ...q([
      'ps',
      '-a',
      '--filter',
      `label=com.docker.compose.project=${project}`,
      '--format',
      'container {{.Names}}',
    ]),
    ...q([
      'network',
      'ls',
      '--filter',
      `label=com.docker.compose.project=${project}`,
      '--format',
      'network {{.Name}}',
    ]),
    ...q([
      'volume',
      'ls',
      '--filter',
      `label=com.docker.compose.project=${project}`,
      '--format',
      'volume {{.Name}}',
    ]),
  ];
}

export async function finished(t: TestServer, id: string, timeoutMs = 240_000) {
  const start = Date.now();
  for (;;) {
    const r = await t.req('GET', `/v1/deployments/${id}`);
    if (r.body.deployment?.FinishedAt) return r.body as { deployment: any; phases: any[] };
    if (Date.now() - start > timeoutMs)
      throw new Error(`deployment ${id} did not finish: ${JSON.stringify(r.body).slice(0, 2000)}`);
    // Every 25 ms for the first 2 s (benchmarks time short deployments through this), then 200 ms.
    await sleep(Date.now() - start < 2000 ? 25 : 200);
  }
}

export async function exec(t: TestServer, env: string, service: string, cmd: string[]) {
  const r = await t.req('POST', `/v1/envs/${env}/exec`, { body: { service, cmd, timeout_sec: 60 } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as { exit_code: number; stdout: string; stderr: string };
}

/** The progress messages svcd sent for an environment's env.create. */
export async function createProgress(t: TestServer, envId: string): Promise<string[]> {
  const cmd = await t.server.ctx.db.get<{ id: string }>(
    "SELECT id FROM commands WHERE kind = 'env.create' AND env_id = ?",
    [envId],
  );
  assert.ok(cmd, `no env.create command for ${envId}`);
  return (await t.req('GET', `/v1/events?subject=cmd:${cmd.id}`)).body.events.map((e: any) => e.Body.message);
}

/**
 * Destroys every environment a test left (through the API, while the sidecar runs, so firewall
 * rules and datasets go too), then sweeps any Docker object still labelled with their projects.
 */
async function destroyAll(t: TestServer, real: Real): Promise<void> {
  const envs = await t.server.ctx.db.all<{ id: string }>(
    "SELECT id FROM environments WHERE status <> 'destroyed'",
  );
  if (real.sidecar && real.sidecar.exitCode === null) {
    const ids: string[] = [];
    for (const e of envs) {
      const r = await t.req('DELETE', `/v1/envs/${e.id}`);
      if (r.status === 202) ids.push(r.body.deployment.ID);
    }
    for (const id of ids) await finished(t, id, 120_000).catch(() => {});
  }
  // What the API could not destroy (an environment of another team than `t`'s key, or a dead
  // sidecar) is removed here: its Docker objects and its deny rules, which would otherwise stay
  // in the host's INPUT path for good.
  for (const e of envs) {
    for (const line of leftovers(e.id)) {
      const [kind, name] = line.split(' ');
      const cmd = kind === 'container' ? ['rm', '-f', name] : [kind, 'rm', name];
      try {
        execFileSync('docker', cmd, { stdio: 'ignore' });
      } catch {}
    }
    await releaseBridge(bridgeName(e.id), e.id).catch(() => {});
  }
}

/** A shell loop that ends promptly on SIGTERM, as a compose command. */
export const IDLE_COMMAND = `["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]`;

/**
 * Service `app` of the e2e stacks (`image`, indented under `services:`): it records its first
 * boot on volume `data` (the stack declares it) and is healthy once it has.
 */
export const bootApp = (image: string) => `  app:
    image: ${image}
    command: ["sh", "-c", "trap 'exit 0' TERM; [ -f /data/boot ] || echo first > /data/boot; while :; do sleep 1; done"]
    volumes: [data:/data]
    healthcheck:
      test: ["CMD", "test", "-f", "/data/boot"]
      interval: 1s
      retries: 60
`;

/** The agent stack of the e2e suites (agent main as 1000:1000 on volume work, a root checker), plus `tail`. */
export const agentStack = (image: string, tail: string) => `
services:
  main:
    image: ${image}
    user: "1000:1000"
    command: ${IDLE_COMMAND}
    volumes: [work:/work]
  checker:
    image: ${image}
    command: ${IDLE_COMMAND}
volumes: {work: {}}
x-svc.agent.service: main
${tail}`;

/** Writes a project directory; returns its path. */
export function writeProject(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'svc-project-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

export async function upload(
  r: Real,
  dir: string,
): Promise<{ upload: string; sha256: string; bytes: number }> {
  const tar = execFileSync('tar', [
    '-C',
    dir,
    '--sort=name',
    '--mtime=@0',
    '--owner=0',
    '--group=0',
    '-czf',
    '-',
    '.',
  ]);
  const res = await r.t.req('PUT', '/v1/uploads', {
    raw: tar,
    headers: { 'content-type': 'application/gzip' },
  });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body;
}
