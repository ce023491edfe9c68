// N paused warm-pool members of a busybox version on one host: what each costs in memory, how long
// the pool takes to fill, and the claim → first exec latency with all N waiting (each claim's
// replacement fork refilling the pool meanwhile). Same-run baseline per claim: Docker's own
// unpause and exec of an idle busybox container of the bench's. Real control plane, real svcd
// (datasets on its XFS image, the --dev default), real Docker.
//
//   node bench/pool/members.ts [--members 500] [--claims 20]
//
// Memory: the host's MemAvailable before the pool and with all N members paused (÷ N), and its
// parts: the members' own cgroups (memory.usage_in_bytes, page cache included), their
// containerd-shim processes, and how much dockerd, containerd and svcd grew. Afterwards the pool
// is deleted and everything its members had is checked gone (bench/density/measure.ts leaks()).
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { sleep } from '../../shared/concurrency.ts';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { finished, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { leaks } from '../density/measure.ts';
import { rawExec } from '../exec/baseline.ts';
import { rssMiB } from '../hub/measure.ts';

const { values } = parseArgs({
  options: { members: { type: 'string', default: '500' }, claims: { type: 'string', default: '20' } },
});
const N = Math.max(1, Number(values.members));
const CLAIMS = Math.max(1, Number(values.claims));
process.env.SVC_XFS_LOOP = 'auto';
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)];
const MiB = 1024 * 1024;

const STACK = `
services:
  main:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
`;

function memAvailableMiB(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}
function pidsNamed(name: string): number[] {
  const out: number[] = [];
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/comm`, 'utf8').trim() === name) out.push(Number(p));
    } catch {}
  }
  return out;
}
const rssOf = (name: string) => pidsNamed(name).reduce((a, p) => a + rssMiB(p), 0);
/** Memory charged to a container's cgroup (cgroup v1, the memory controller), MiB. */
function cgroupMiB(id: string): number {
  try {
    return Number(readFileSync(`/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`, 'utf8')) / MiB;
  } catch {
    return Number.NaN;
  }
}
/** A process's proportional set size, MiB: shared pages (the shim binary's) split among their users. */
function pssMiB(pid: number): number {
  const m = /Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}
/** containerd-shim processes serving these containers (their command line names the id): RSS and PSS. */
function shimMiB(ids: Set<string>): { rss: number; pss: number } {
  const sum = { rss: 0, pss: 0 };
  for (const p of pidsNamed('containerd-shim')) {
    try {
      const args = readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (![...ids].some((id) => args.includes(id))) continue;
      sum.rss += rssMiB(p);
      sum.pss += pssMiB(p);
    } catch {}
  }
  return sum;
}

const docker = new Docker();
await ensureTestImages();
const raw = await docker.createContainer({
  Image: BUSYBOX_IMAGE,
  Cmd: ['sleep', '3600'],
  HostConfig: { AutoRemove: true, NetworkMode: 'none' },
});
await raw.start();
const r = await startReal();
const svcdPid = r.sidecar.pid as number;
const out: string[] = [];
const claims: { claim: number; exec: number; rawUnpause: number; rawExec: number; load: number }[] = [];
let envIds: string[] = [];
try {
  const req = r.t.req;
  await req('POST', '/v1/projects', { body: { name: 'pooled' } });
  const d = await finished(
    r.t,
    (await req('POST', '/v1/projects/pooled/deploy', { body: { compose: STACK } })).body.deployment.ID,
  );
  if (d.deployment.Status !== 'succeeded') throw new Error(`deploy: ${d.deployment.Error}`);
  const ver = d.deployment.VersionID;
  await sleep(2000);
  const before = {
    avail: memAvailableMiB(),
    dockerd: rssOf('dockerd'),
    containerd: rssOf('containerd'),
    svcd: rssMiB(svcdPid),
    load: loadavg()[0],
  };
  const t0 = Date.now();
  const set = await req('POST', `/v1/versions/${ver}/pool`, { body: { size: N } });
  if (set.status !== 200) throw new Error(`pool: ${JSON.stringify(set.body)}`);
  let p = set.body.pool;
  for (let i = 0; p.ready < N; i++) {
    if (Date.now() - t0 > 3_600_000)
      throw new Error(`the pool did not fill in an hour: ${JSON.stringify(p)}`);
    await sleep(2000);
    p = (await req('GET', `/v1/versions/${ver}/pool`)).body.pool;
    if (i % 15 === 0) console.error(`${Math.round((Date.now() - t0) / 1000)} s: ${JSON.stringify(p)}`);
  }
  const fillS = (Date.now() - t0) / 1000;
  await sleep(5000); // the last pauses settle
  const members = await r.t.server.ctx.db.all<{ env_id: string }>('SELECT env_id FROM pool_members');
  envIds = members.map((m) => m.env_id);
  const ids = new Set<string>();
  for (const m of members)
    for (const c of await docker.listContainers({
      all: true,
      filters: { label: [`com.docker.compose.project=${m.env_id.toLowerCase()}`] },
    }))
      ids.add(c.Id);
  const after = {
    avail: memAvailableMiB(),
    dockerd: rssOf('dockerd'),
    containerd: rssOf('containerd'),
    svcd: rssMiB(svcdPid),
    load: loadavg()[0],
  };
  const cg = [...ids].map(cgroupMiB).filter(Number.isFinite);
  const shim = shimMiB(ids);
  const perMember = (before.avail - after.avail) / N;
  out.push(
    `${N} paused members of a busybox version filled in ${fillS.toFixed(0)} s (load ${before.load.toFixed(1)} → ${after.load.toFixed(1)})`,
    '',
    '| memory | MiB |',
    '|---|---|',
    `| host MemAvailable drop ÷ ${N} members (the host is shared: other jobs move it too) | ${perMember.toFixed(1)} |`,
    `| **a member: its cgroup + its shim's PSS + dockerd's and containerd's growth ÷ ${N}** | **${(pct(cg, 50) + (shim.pss + after.dockerd - before.dockerd + after.containerd - before.containerd) / N).toFixed(1)}** |`,
    `| a member's container cgroup (p50 of ${cg.length}; page cache included) | ${pct(cg, 50)?.toFixed(1)} |`,
    `| its containerd-shim, PSS (sum ÷ ${N}; RSS ${(shim.rss / N).toFixed(1)}, the shared binary counted in each) | ${(shim.pss / N).toFixed(1)} |`,
    `| dockerd growth ÷ ${N} | ${((after.dockerd - before.dockerd) / N).toFixed(2)} |`,
    `| containerd growth ÷ ${N} | ${((after.containerd - before.containerd) / N).toFixed(2)} |`,
    `| svcd growth ÷ ${N} (svcd ${before.svcd.toFixed(0)} → ${after.svcd.toFixed(0)} MiB) | ${((after.svcd - before.svcd) / N).toFixed(2)} |`,
  );
  console.error(out.join('\n'));
  const claimed: string[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    const load = loadavg()[0];
    const c0 = performance.now();
    const c = await req('POST', '/v1/sandboxes', { body: { from_version: ver, name: `ep-${i}` } });
    const c1 = performance.now();
    if (c.status !== 201) throw new Error(`claim: ${c.status} ${JSON.stringify(c.body).slice(0, 300)}`);
    const env = c.body.environment.ID as string;
    const x = await req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd: ['true'] } });
    if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(x.body)}`);
    const c2 = performance.now();
    claimed.push(env);
    await raw.pause();
    const u0 = performance.now();
    await raw.unpause();
    const u1 = performance.now();
    await rawExec(raw);
    claims.push({
      claim: c1 - c0,
      exec: c2 - c1,
      rawUnpause: u1 - u0,
      rawExec: performance.now() - u1,
      load,
    });
    console.error(
      `claim ${i}: ${JSON.stringify(claims.at(-1), (_k, v) => (typeof v === 'number' ? Math.round(v) : v))}`,
    );
    await sleep(1000);
  }
  for (const env of claimed) await finished(r.t, (await req('DELETE', `/v1/envs/${env}`)).body.deployment.ID);
  await req('DELETE', `/v1/versions/${ver}/pool`);
  for (let i = 0; i < 900; i++) {
    const left = await r.t.server.ctx.db.get<{ n: number }>(
      "SELECT COUNT(*) AS n FROM environments WHERE name LIKE 'pool-%' AND status <> 'destroyed'",
    );
    if (Number(left?.n) === 0) break;
    await sleep(1000);
  }
  const everyEnv = (
    await r.t.server.ctx.db.all<{ id: string }>(
      "SELECT id FROM environments WHERE name LIKE 'pool-%' OR name LIKE 'ep-%'",
    )
  ).map((e) => e.id);
  const left = leaks([...new Set([...envIds, ...everyEnv])], r.dataDir, r.dir);
  out.push(
    '',
    `after DELETE of the pool: ${left.length} things left behind${left.length ? `: ${left.slice(0, 5).join('; ')}` : ''}`,
  );
} finally {
  await r.close().catch((err) => console.error(`cleanup: ${err.message}`));
  await closeXfsLoop(r.dataDir);
  await raw.remove({ force: true }).catch(() => {});
}
const f = (xs: number[]) => `${pct(xs, 50).toFixed(0)} / ${pct(xs, 99).toFixed(0)}`;
console.log(
  [
    ...out,
    '',
    `${claims.length} claims with the pool full, 1 s apart (each replacement refilling meanwhile); load at each: ${claims.map((c) => c.load.toFixed(1)).join(', ')}`,
    '',
    '| ms, p50 / p99 | claim + first exec | claim | first exec | raw unpause (idle busybox) | raw exec `true` |',
    '|---|---|---|---|---|---|',
    `| ${N} members | **${f(claims.map((c) => c.claim + c.exec))}** | ${f(claims.map((c) => c.claim))} | ${f(claims.map((c) => c.exec))} | ${f(claims.map((c) => c.rawUnpause))} | ${f(claims.map((c) => c.rawExec))} |`,
  ].join('\n'),
);
process.exit(0);
