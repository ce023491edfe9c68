// Soak: N minutes of mixed honest work and hostile input on one `svc-server --dev` with its local
// svcd on this machine's Docker; reports whether either process exited, every unexpected answer,
// latency per operation, RSS and fd slopes after warm-up, stuck deployments and what was left on
// the host. See bench/soak/README.md.
//
//   node bench/soak/run.ts [--minutes 30] [--db sqlite|postgres|sqlite,postgres] [--warmup MIN]
//                          [--workers 2] [--followers 3] [--sample 5] [--cr-entries 4000]
//                          [--bomb-mib 64] [--oversize-mib 600] [--oversize-every 10]
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FakeSidecar } from '../../test/support/fake-sidecar.ts';
import { FakeGitHub } from '../../test/support/fakes/github.ts';
import { ensureTestImages } from '../../test/support/images.ts';
import { WEBHOOK_SECRET } from '../../test/support/webhooks.ts';
import { cleanupAll, installExitHandlers, nonNegative, onCleanup } from '../hub/proc.ts';
import { awaitDeployments, destroyEverything, type EndState, endState } from './checks.ts';
import { Hostile } from './hostile.ts';
import { client, sleep } from './http.ts';
import { type Dialect, startPlane, trend } from './plane.ts';
import { Recorder } from './record.ts';
import { format, goals, type Result, resultPath, save } from './report.ts';
import { follow } from './sse.ts';
import { DEPLOY_BOUND_MS, Work } from './work.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    db: { type: 'string', default: 'sqlite' },
    warmup: { type: 'string' },
    workers: { type: 'string', default: '2' },
    followers: { type: 'string', default: '3' },
    sample: { type: 'string', default: '5' },
    'cr-entries': { type: 'string', default: '4000' },
    'bomb-mib': { type: 'string', default: '64' },
    'oversize-mib': { type: 'string', default: '600' },
    'oversize-every': { type: 'string', default: '10' },
  },
});
const MINUTES = nonNegative('minutes', values.minutes);
const DBS = values.db.split(',') as Dialect[];
if (DBS.some((d) => d !== 'sqlite' && d !== 'postgres'))
  throw new Error('--db: sqlite, postgres or both (run one after the other)');
const WARMUP = values.warmup ? nonNegative('warmup', values.warmup) : Math.min(5, MINUTES / 3);
const WORKERS = nonNegative('workers', values.workers);
const FOLLOWERS = nonNegative('followers', values.followers);
const SAMPLE_MS = nonNegative('sample', values.sample) * 1000;
const HOSTILE = {
  crEntries: nonNegative('cr-entries', values['cr-entries']),
  bombMiB: nonNegative('bomb-mib', values['bomb-mib']),
  oversizeMiB: nonNegative('oversize-mib', values['oversize-mib']),
};
const OVERSIZE_EVERY_MIN = nonNegative('oversize-every', values['oversize-every']);
/** Pause between hostile bursts, so honest work keeps most of the machine. */
const HOSTILE_PAUSE_MS = 1500;

function say(line: string): void {
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

function pick<T extends [string, number, () => Promise<unknown>]>(ops: T[]): T {
  let r = Math.random() * ops.reduce((n, o) => n + o[1], 0);
  for (const o of ops) {
    r -= o[1];
    if (r < 0) return o;
  }
  return ops[ops.length - 1];
}

/** A second team (dev sign-in) with a joined stand-in host: its stream takes the stray frames. */
async function otherTeam(url: string): Promise<{ key: string; host: { id: string; secret: string } }> {
  const anon = client(url, '');
  const login = await anon.call('POST', '/auth/dev-login', {
    body: { email: 'soak-b@example.com' },
    token: false,
  });
  const key = await anon.call('POST', '/v1/keys', { body: { name: 'soak-b' }, token: login.body?.token });
  const jt = await client(url, key.body?.api_key).call('POST', '/v1/join-tokens', { body: {} });
  if (jt.status !== 201)
    throw new Error(`team B join token: ${login.status} ${key.status} ${jt.status} ${jt.text}`);
  const sc = await new FakeSidecar(url).connect(jt.body.token);
  onCleanup(() => sc.close());
  return { key: key.body.api_key, host: { id: sc.hostId, secret: sc.secret } };
}

async function soak(dialect: Dialect): Promise<Result> {
  const dir = mkdtempSync(join(tmpdir(), `svc-soak-${dialect}-`));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const gh = await new FakeGitHub().start();
  onCleanup(() => gh.close());
  const startedAt = new Date().toISOString();
  const loadStart = loadavg();
  const t0 = Date.now();
  say(`${dialect}: starting svc-server --dev in ${dir}`);
  const log = resultPath(dialect, startedAt, 'log');
  const plane = await startPlane({
    dialect,
    dir,
    log,
    env: gh.env(WEBHOOK_SECRET),
    sampleMs: SAMPLE_MS,
    t0,
    say,
  });
  onCleanup(async () => {
    await plane.stop();
    await plane.closeStore();
  });
  const c = client(plane.url, plane.key);
  const rec = new Recorder();
  const work = new Work(c, rec);
  const stage = await work.setup();
  const project = await c.call('POST', '/v1/projects', { body: { name: 'soak-h' } });
  if (project.status !== 201) throw new Error(`create soak-h: ${project.status} ${project.text}`);
  const b = await otherTeam(plane.url);
  const hostile = new Hostile(
    plane.url,
    plane.key,
    rec,
    { project: 'soak-h', env: stage.base, host: b.host, otherKey: b.key },
    HOSTILE,
  );
  await hostile.setup();
  say(`${dialect}: set up in ${((Date.now() - t0) / 1000).toFixed(0)} s; soaking for ${MINUTES} min`);

  const deadline = Date.now() + MINUTES * 60_000;
  const running = () => Date.now() < deadline;
  const guard = async (op: string, kind: 'work' | 'hostile', f: () => Promise<unknown>) => {
    try {
      await f();
    } catch (err) {
      rec.note(op, kind, 'unexpected-other', 0, `harness: ${(err as Error).message}`);
    }
  };
  const whileUp = async (loop: () => Promise<void>) => {
    while (running()) {
      if (!plane.up()) await sleep(1000);
      else await loop();
    }
  };
  const ops = work.ops(stage);
  const workers = Array.from({ length: WORKERS }, () =>
    whileUp(async () => {
      const [name, , f] = pick(ops);
      await guard(name, 'work', f);
    }),
  );
  const hostileOps = hostile.ops().filter(([n]) => n !== 'upload.oversize');
  let nextOversize = Date.now() + 30_000;
  let round = 0;
  const attacker = whileUp(async () => {
    if (OVERSIZE_EVERY_MIN > 0 && Date.now() >= nextOversize) {
      nextOversize = Date.now() + OVERSIZE_EVERY_MIN * 60_000;
      await guard('h.upload.oversize', 'hostile', () => hostile.oversize());
    } else {
      // Every kind once first (a short run sees them all), then by weight.
      const [name, , f] = round < hostileOps.length ? hostileOps[round] : pick(hostileOps);
      round++;
      await guard(`h.${name}`, 'hostile', f);
    }
    await sleep(HOSTILE_PAUSE_MS);
  });
  const followers = follow(plane.url, plane.key, FOLLOWERS, rec, [20_000, 90_000], plane.up);
  const progress = setInterval(() => {
    const s = plane.samples.at(-1);
    say(
      `+${((Date.now() - t0) / 60_000).toFixed(1)} min: ${rec.summary().reduce((n, o) => n + o.count, 0)} answers, ${rec.unexpected()} unexpected, ` +
        `server ${s?.server ? `${s.server.rssMiB.toFixed(0)} MiB ${s.server.fds} fds` : 'DOWN'}, svcd ${s?.svcd ? `${s.svcd.rssMiB.toFixed(0)} MiB ${s.svcd.fds} fds` : 'DOWN'}, exits ${plane.exits.length}`,
    );
  }, 60_000);
  await Promise.all([...workers, attacker]);
  const loadEndMin = (Date.now() - t0) / 60_000;
  clearInterval(progress);
  await followers.stop();
  await hostile.settle();
  const loadEnd = loadavg();
  const trends = {
    server: trend(plane.samples, 'server', WARMUP, loadEndMin),
    svcd: trend(plane.samples, 'svcd', WARMUP, loadEndMin),
  };
  say(`${dialect}: load over; waiting for deployments, destroying everything, checking the host`);

  let end: EndState | { error: string };
  try {
    await awaitDeployments(plane.db, DEPLOY_BOUND_MS);
    await destroyEverything(c, plane.db, DEPLOY_BOUND_MS);
    end = await endState(plane.db, plane.devDir, DEPLOY_BOUND_MS);
  } catch (err) {
    end = { error: (err as Error).message };
  }
  await plane.stop();
  await plane.closeStore();
  const partial = {
    dialect,
    startedAt,
    minutes: MINUTES,
    warmupMin: WARMUP,
    loadAvg: { start: loadStart, end: loadEnd },
    ops: rec.summary(),
    sseEvents: followers.events(),
    trends,
    samples: plane.samples,
    exits: plane.exits,
    end,
    log: plane.log,
  };
  return { ...partial, goals: goals(partial) };
}

installExitHandlers();
let failed = false;
try {
  await ensureTestImages();
  for (const dialect of DBS) {
    const r = await soak(dialect);
    const file = save(r);
    process.stdout.write(`${format(r)}\nresult: ${file}\n\n`);
    failed ||= Object.values(r.goals).some((ok) => !ok);
  }
} finally {
  await cleanupAll();
}
process.exit(failed ? 1 : 0);
