// What an exec costs when the host's stream is on another replica: two replicas (A, B) on one
// throwaway Postgres, one simulated sidecar on A, one deployed environment; the same execs sent
// through A (the host's own replica: the baseline) and through B (routed over NOTIFY and the
// command row), interleaved round by round, the order flipped every round. Both replicas and the
// sidecar share this process, so the figures are latency and rate, not CPU per replica.
//   node bench/replicas/routed-exec.ts [--n 400] [--concurrency 8] [--rounds 5]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { deploy, joinFake } from '../../test/orchestrator/harness.ts';
import { startCluster } from '../../test/support/postgres.ts';
import { startReplica, startTestServer, type TestServer } from '../../test/support/server.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '8' },
    rounds: { type: 'string', default: '5' },
  },
});
const N = Number(values.n);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const cluster = process.env.SVC_TEST_PG ? null : await startCluster();
if (cluster) process.env.SVC_TEST_PG = cluster.dsn;
const a = await startTestServer('postgres');
const b = await startReplica(a);
const sc = await joinFake(a);
const p = await a.req('POST', '/v1/projects', { body: { name: 'bench' } });
const alpha = p.body.environments[0].ID as string;
await deploy({ t: a, sc, project: p.body.project.ID, alpha });

async function run(t: TestServer): Promise<{ rate: number; p50: number; p99: number }> {
  const times: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < N) {
        const s = performance.now();
        const r = await fetch(`${t.url}/v1/envs/${alpha}/exec`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ service: 'app', cmd: ['true'] }),
        });
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`exec answered ${r.status}`);
        times.push(performance.now() - s);
      }
    }),
  );
  const wall = performance.now() - t0;
  times.sort((x, y) => x - y);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  return { rate: (times.length * 1000) / wall, p50: at(0.5), p99: at(0.99) };
}

// Warm both paths (statements prepared, LISTEN connections up) before anything is measured.
await run(a);
await run(b);
const rows: string[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  const order: [string, TestServer][] = [
    ['local (A)', a],
    ['routed (B)', b],
  ];
  if (round % 2 === 0) order.reverse();
  for (const [name, t] of order) {
    const before = load();
    const r = await run(t);
    rows.push(
      `| ${round} | ${name} | ${r.rate.toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${before} |`,
    );
  }
}
process.stdout.write(
  `| round | path | exec/s | p50 ms | p99 ms | load before |\n|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
);
await sc.close();
await b.close();
await a.close();
cluster?.stop();
