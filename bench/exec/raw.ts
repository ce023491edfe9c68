// Exec latency: running `true` in a busybox container
//   (a) through DockerEngine.exec, as env.exec does (compose-label lookup + exec + demux + exit code),
//   (a') through execIn alone (the same wrapper with the container already known),
//   (b) with raw dockerode calls and no wrapper (create, start hijacked, read to end, inspect),
//   (c) with the `docker exec` CLI.
//
//   node bench/exec/raw.ts [--n 200] [--warmup 10]
//
// Needs a Docker engine; builds svc-test/busybox when missing. Prints p50/p99/mean in ms.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { DockerEngine, EngineState, PROJECT_LABEL, SERVICE_LABEL } from '../../sidecar/docker/engine.ts';
import { execIn } from '../../sidecar/docker/exec.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { cliExec, rawExec } from './baseline.ts';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '200' }, warmup: { type: 'string', default: '10' } },
});
const N = Math.max(1, Number(values.n));
const WARMUP = Math.max(0, Number(values.warmup));

const docker = new Docker();
const project = `bench_exec_${randomBytes(3).toString('hex')}`;

/**
 * Runs the paths round-robin (order rotating each round), so drift in the machine's load (other
 * work on a shared host) lands on every path alike instead of on whichever series ran last.
 */
async function interleaved(
  paths: [string, () => Promise<unknown>][],
): Promise<{ name: string; ms: number[] }[]> {
  for (let i = 0; i < WARMUP; i++) for (const [, fn] of paths) await fn();
  const out = paths.map(([name]) => ({ name, ms: [] as number[] }));
  for (let i = 0; i < N; i++) {
    for (let k = 0; k < paths.length; k++) {
      const j = (i + k) % paths.length;
      const t0 = process.hrtime.bigint();
      await paths[j][1]();
      out[j].ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  return out;
}

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main(): Promise<void> {
  await ensureTestImages();
  const container = await docker.createContainer({
    Image: BUSYBOX_IMAGE,
    Cmd: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'],
    Labels: { [PROJECT_LABEL]: project, [SERVICE_LABEL]: 'box' },
  });
  await container.start();
  try {
    const engine = new DockerEngine(project, docker, new EngineState());
    const results = await interleaved([
      ['(a) DockerEngine.exec (lookup + wrapper)', () => engine.exec('box', ['true'])],
      ["(a') execIn (wrapper, container known)", () => execIn(container, 'box', ['true'])],
      ['(b) raw dockerode exec', () => rawExec(container)],
      ['(c) docker exec CLI', () => cliExec(container.id)],
    ]);
    const info = await docker.version();
    console.log(
      `exec of \`true\` in ${BUSYBOX_IMAGE}, engine ${info.Version}, N=${N} each, interleaved, after ${WARMUP} warm-up rounds`,
    );
    console.log('| path | p50 ms | p99 ms | mean ms |');
    console.log('|---|---:|---:|---:|');
    for (const r of results) {
      const sorted = [...r.ms].sort((a, b) => a - b);
      const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
      console.log(
        `| ${r.name} | ${pct(sorted, 50).toFixed(1)} | ${pct(sorted, 99).toFixed(1)} | ${mean.toFixed(1)} |`,
      );
    }
  } finally {
    await container.remove({ force: true });
  }
}

await main();
