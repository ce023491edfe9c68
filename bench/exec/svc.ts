// Exec round trip through svc (HTTP → control plane → host stream → svcd → Engine API → back)
// against a raw Engine API exec and the `docker exec` CLI on the same container, in the same run,
// interleaved so load drift lands on every path alike.
//
//   node bench/exec/svc.ts [--n 200] [--warmup 10]
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { startTestServer } from '../../test/support/server.ts';
import { svcdJoinArgs } from '../../test/support/svcd.ts';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '200' }, warmup: { type: 'string', default: '10' } },
});
const N = Number(values.n);
const WARMUP = Number(values.warmup);

await ensureTestImages();
const dir = mkdtempSync(join(tmpdir(), 'svc-bench-exec-'));
const t = await startTestServer('sqlite', {}, { limits: NO_RATE_LIMITS });
const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
const child: ChildProcess = spawn(process.execPath, svcdJoinArgs(t.url, jt.body.token, dir), {
  stdio: ['ignore', 'ignore', 'pipe'],
});
let log = '';
child.stderr?.on('data', (d) => (log += d));
while (!/connected to /.test(log)) await new Promise((r) => setTimeout(r, 50));

try {
  await t.req('POST', '/v1/projects', { body: { name: 'bench' } });
  const compose = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]\n`;
  const d = await t.req('POST', '/v1/projects/bench/deploy', { body: { compose } });
  let dep: any;
  do {
    await new Promise((r) => setTimeout(r, 100));
    dep = (await t.req('GET', `/v1/deployments/${d.body.deployment.ID}`)).body.deployment;
  } while (!dep.FinishedAt);
  if (dep.Status !== 'succeeded') throw new Error(dep.Error);
  const env = dep.EnvID;
  const docker = new Docker();
  const [info] = await docker.listContainers({
    filters: { label: [`com.docker.compose.project=${env.toLowerCase()}`] },
  });
  const container = docker.getContainer(info.Id);

  const viaSvc = async () => {
    const r = await t.req('POST', `/v1/envs/${env}/exec`, { body: { service: 'app', cmd: ['true'] } });
    if (r.status !== 200 || r.body.exit_code !== 0) throw new Error(JSON.stringify(r.body));
  };
  const raw = async () => {
    const exec = await container.exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true });
    const stream = (await exec.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
    await new Promise<void>((res, rej) => {
      stream.on('end', res);
      stream.on('error', rej);
      stream.resume();
    });
    await exec.inspect();
  };
  const cli = () =>
    new Promise<void>((res, rej) =>
      execFile('docker', ['exec', info.Id, 'true'], (e) => (e ? rej(e) : res())),
    );
  const paths: [string, () => Promise<void>][] = [
    ['svc exec (POST /v1/envs/{env}/exec)', viaSvc],
    ['raw Engine API exec (dockerode)', raw],
    ['docker exec CLI', cli],
  ];
  for (let i = 0; i < WARMUP; i++) for (const [, fn] of paths) await fn();
  const ms = paths.map(() => [] as number[]);
  for (let i = 0; i < N; i++) {
    for (let k = 0; k < paths.length; k++) {
      const j = (i + k) % paths.length;
      const t0 = process.hrtime.bigint();
      await paths[j][1]();
      ms[j].push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  const pct = (xs: number[], p: number) =>
    [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
  console.log(`\nexec of \`true\` in a busybox container, N=${N} each, interleaved\n`);
  console.log('| path | p50 ms | p99 ms |');
  console.log('|---|---:|---:|');
  for (const [i, [name]] of paths.entries())
    console.log(`| ${name} | ${pct(ms[i], 50).toFixed(1)} | ${pct(ms[i], 99).toFixed(1)} |`);
  console.log(
    `\nsvc overhead over raw Engine API exec at p50: ${(pct(ms[0], 50) - pct(ms[1], 50)).toFixed(1)} ms (goal < 10 ms)`,
  );
  const del = await t.req('DELETE', `/v1/envs/${env}`);
  for (;;) {
    const r = await t.req('GET', `/v1/deployments/${del.body.deployment.ID}`);
    if (r.body.deployment.FinishedAt) break;
    await new Promise((res) => setTimeout(res, 100));
  }
} finally {
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  await t.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
