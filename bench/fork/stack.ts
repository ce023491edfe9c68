// Fork of a whole environment, end to end: a real control plane, a real svcd and real Docker.
// For each storage backend available here, a one-service stack whose volume holds 5 MB and then
// 500 MB is snapshotted and forked repeatedly; reported are the sidecar's clone time (`forked_in`:
// datasets cloned + stack started + egress probed), the deployment's wall time, and `cp -a` of
// the same volume on the same file system, measured in the same run.
//
//   node bench/fork/stack.ts [--runs 3] [--sizes 5,500] [--only dir,xfs,btrfs,zfs]
import { type ChildProcess, spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { run } from '../../sidecar/storage/exec.ts';
import { fsTier, loopFs, type Scratch, tmpDataDir, zfsPool } from '../../sidecar/storage/fixtures.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { startTestServer, type TestServer } from '../../test/support/server.ts';
import { svcdJoinArgs } from '../../test/support/svcd.ts';
import { writeVolume } from './volume.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    sizes: { type: 'string', default: '5,500' },
    only: { type: 'string', default: 'dir,xfs,btrfs,zfs' },
  },
});
const RUNS = Math.max(1, Number(values.runs));
const SIZES = values.sizes.split(',').map(Number);
const ONLY = new Set(values.only.split(','));

const COMPOSE = `services:
  app:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumes: [data:/data]
volumes: {data: {}}
x-svc.egress: allow
`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

async function finished(t: TestServer, id: string) {
  for (;;) {
    const r = await t.req('GET', `/v1/deployments/${id}`);
    if (r.body.deployment.FinishedAt) {
      if (r.body.deployment.Status !== 'succeeded') throw new Error(`${id}: ${r.body.deployment.Error}`);
      return r.body as { deployment: any; phases: any[] };
    }
    await new Promise((res) => setTimeout(res, 25));
  }
}

async function sidecar(t: TestServer, scratch: Scratch): Promise<ChildProcess> {
  const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
  const args = svcdJoinArgs(t.url, jt.body.token, scratch.dir);
  if (scratch.pool) args.push('--zfs-pool', scratch.pool);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let out = '';
  child.stderr?.on('data', (d) => (out += d));
  while (!/connected to /.test(out)) {
    if (child.exitCode !== null) throw new Error(out);
    await new Promise((r) => setTimeout(r, 50));
  }
  return child;
}

interface Row {
  backend: string;
  storage: string;
  mb: number;
  forkedIn: number;
  deployment: number;
  cp: number;
}

async function measure(backend: string, scratch: Scratch): Promise<Row[]> {
  const t = await startTestServer('sqlite', {}, { limits: NO_RATE_LIMITS });
  const child = await sidecar(t, scratch);
  const rows: Row[] = [];
  try {
    const storage = (await t.req('GET', '/v1/hosts')).body.hosts[0].Capabilities.storage;
    for (const mb of SIZES) {
      const name = `b${mb}`;
      await t.req('POST', '/v1/projects', { body: { name } });
      const d = await finished(
        t,
        (await t.req('POST', `/v1/projects/${name}/deploy`, { body: { compose: COMPOSE } })).body.deployment
          .ID,
      );
      const env = d.deployment.EnvID;
      const volume = join(scratch.dir, 'data', 'envs', env, 'vol', 'data');
      await writeVolume(join(volume, 'seed'), mb);
      const snap = await finished(t, (await t.req('POST', `/v1/envs/${env}/snapshot`)).body.deployment.ID);
      const version = snap.deployment.VersionID;
      const forkedIn: number[] = [];
      const wall: number[] = [];
      const cp: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        await run('sync', []);
        const t0 = Date.now();
        const f = await finished(
          t,
          (await t.req('POST', `/v1/envs/${env}/fork`, { body: { version, name: `f${i}` } })).body.deployment
            .ID,
        );
        wall.push(Date.now() - t0);
        forkedIn.push(f.phases.find((p) => p.Name === 'clone').Evidence.forked_in_ms);
        await finished(t, (await t.req('DELETE', `/v1/envs/${f.deployment.EnvID}`)).body.deployment.ID);
        await run('sync', []);
        const c0 = process.hrtime.bigint();
        await run('cp', ['-a', volume, join(scratch.dir, `cp${i}`)]);
        cp.push(Number(process.hrtime.bigint() - c0) / 1e6);
        await rm(join(scratch.dir, `cp${i}`), { recursive: true, force: true });
      }
      await finished(t, (await t.req('DELETE', `/v1/envs/${env}`)).body.deployment.ID);
      rows.push({
        backend,
        storage,
        mb,
        forkedIn: median(forkedIn),
        deployment: median(wall),
        cp: median(cp),
      });
      console.error(
        `  ${backend} ${mb} MB: forked_in ${median(forkedIn)} ms, deployment ${median(wall)} ms, cp -a ${median(cp).toFixed(1)} ms`,
      );
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    await t.close();
  }
  return rows;
}

await ensureTestImages();
const setups: [string, () => Promise<Scratch>, false | string][] = [
  ['dir (ext4)', tmpDataDir, false],
  ['dir (XFS reflink)', () => loopFs('xfs', 4096), fsTier('xfs')],
  ['btrfs', () => loopFs('btrfs', 4096), fsTier('btrfs')],
  ['zfs (zfs-fuse)', () => zfsPool(4096), fsTier('zfs')],
];
const rows: Row[] = [];
for (const [name, make, skip] of setups) {
  const key = name.split(' ')[0] === 'dir' && name.includes('XFS') ? 'xfs' : name.split(' ')[0];
  if (!ONLY.has(key)) continue;
  if (skip) {
    console.error(`${name}: skipped (${skip})`);
    continue;
  }
  const scratch = await make();
  try {
    rows.push(...(await measure(name, scratch)));
  } finally {
    await scratch.cleanup();
  }
}
console.log(
  `\nfork of a one-service stack, median of ${RUNS}; forked_in = clone datasets + start + egress probe\n`,
);
console.log(
  '| backend | reported storage | volume | forked_in (sidecar) | fork deployment (API) | cp -a of the volume |',
);
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.backend} | ${r.storage} | ${r.mb} MB | ${r.forkedIn} ms | ${r.deployment} ms | ${r.cp.toFixed(1)} ms |`,
  );
}
for (const b of new Set(rows.map((r) => r.backend))) {
  const [small, big] = [
    rows.find((r) => r.backend === b && r.mb === SIZES[0]),
    rows.find((r) => r.backend === b && r.mb === SIZES.at(-1)),
  ];
  if (small && big && small !== big) {
    console.log(
      `${b}: forked_in ${SIZES.at(-1)} MB / ${SIZES[0]} MB = ${(big.forkedIn / small.forkedIn).toFixed(2)}x (cp -a ${(big.cp / small.cp).toFixed(2)}x)`,
    );
  }
}
process.exit(0);
