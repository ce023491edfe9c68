// Density: N concurrent image sandboxes on one host, each a whole lifecycle through the API
// (POST /v1/sandboxes with a busybox image → exec → DELETE and wait), with a real control plane,
// a real svcd and real Docker. Reported per N: lifecycles that succeeded, lifecycles/s, p50/p99 of
// one lifecycle, and Docker objects left behind. Same-run baseline: N concurrent
// `docker run --rm <image> true` (no network of their own, no API).
//
//   node bench/density/run.ts [--sizes 50,100] (200 is heavy on a shared machine: run it once)
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import { finished, leftovers, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';

const { values } = parseArgs({ options: { sizes: { type: 'string', default: '50,100' } } });
const SIZES = values.sizes.split(',').map(Number);
const pct = (xs: number[], p: number) =>
  xs.length ? [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] : Number.NaN;

function dockerRun(): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile('docker', ['run', '--rm', '--network', 'none', BUSYBOX_IMAGE, 'true'], (err, _o, e) =>
      err ? reject(new Error(e || err.message)) : resolve(),
    ),
  );
}

interface Row {
  n: number;
  ok: number;
  failed: string[];
  wallMs: number;
  p50: number;
  p99: number;
  leaks: number;
  baseWallMs: number;
  baseP50: number;
  baseP99: number;
}

await ensureTestImages();
const r = await startReal();
const rows: Row[] = [];
try {
  for (const n of SIZES) {
    const times: number[] = [];
    const failed: string[] = [];
    const envs: string[] = [];
    const lifecycle = async (i: number) => {
      const t0 = Date.now();
      const c = await r.t.req('POST', '/v1/sandboxes', {
        body: {
          image: BUSYBOX_IMAGE,
          cmd: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'],
          name: `d${n}-${i}`,
          volumes: [],
        },
      });
      if (c.status !== 201) throw new Error(`create: ${c.status} ${JSON.stringify(c.body).slice(0, 300)}`);
      const env = c.body.environment.ID as string;
      envs.push(env);
      const x = await r.t.req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd: ['true'] } });
      if (x.status !== 200 || x.body.exit_code !== 0)
        throw new Error(`exec: ${x.status} ${JSON.stringify(x.body).slice(0, 300)}`);
      const d = await r.t.req('DELETE', `/v1/envs/${env}`);
      const done = await finished(r.t, d.body.deployment.ID, 600_000);
      if (done.deployment.Status !== 'succeeded') throw new Error(`destroy: ${done.deployment.Error}`);
      times.push(Date.now() - t0);
    };
    const w0 = Date.now();
    await Promise.all(
      Array.from({ length: n }, (_, i) => lifecycle(i).catch((err: Error) => void failed.push(err.message))),
    );
    const wallMs = Date.now() - w0;
    const leaks = envs.flatMap((e) => leftovers(e)).length;
    const base: number[] = [];
    const b0 = Date.now();
    await Promise.all(
      Array.from({ length: n }, async () => {
        const t0 = Date.now();
        await dockerRun();
        base.push(Date.now() - t0);
      }),
    );
    const row: Row = {
      n,
      ok: times.length,
      failed,
      wallMs,
      p50: pct(times, 50),
      p99: pct(times, 99),
      leaks,
      baseWallMs: Date.now() - b0,
      baseP50: pct(base, 50),
      baseP99: pct(base, 99),
    };
    rows.push(row);
    console.error(`N=${n}: ${row.ok}/${n} ok in ${wallMs} ms; p50 ${row.p50} p99 ${row.p99}; leaks ${leaks}`);
    for (const f of [...new Set(failed)].slice(0, 5)) console.error(`  failure: ${f}`);
  }
} finally {
  await r.close();
}
console.log(
  '\n| N | succeeded | lifecycles/s | p50 | p99 | left behind | baseline `docker run --rm` N at once: runs/s, p50, p99 |',
);
console.log('|---|---|---|---|---|---|---|');
for (const x of rows)
  console.log(
    `| ${x.n} | ${x.ok}/${x.n} | ${((x.ok / x.wallMs) * 1000).toFixed(2)} | ${x.p50} ms | ${x.p99} ms | ${x.leaks} | ${((x.n / x.baseWallMs) * 1000).toFixed(2)}/s, ${x.baseP50} ms, ${x.baseP99} ms |`,
  );
process.exit(0);
