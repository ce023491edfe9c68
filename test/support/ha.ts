// Several real svc-server processes on one Postgres database behind a real HAProxy, configured by
// the repository's own release/ha/haproxy.cfg: what docs/ha.md tells operators to run.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Child, freePort, startChild } from './program.ts';
import { dbTarget } from './server.ts';
import { HAPROXY } from './tiers.ts';

const CONFIG = new URL('../../release/ha/haproxy.cfg', import.meta.url).pathname;

export interface Replica extends Child {
  name: string;
  e2bUrl: string;
}

export interface Cluster {
  key: string;
  db: string;
  replicas: Replica[];
  /** The balancer's API and E2B addresses. */
  url: string;
  e2bUrl: string;
  haproxy: ChildProcess;
  /** Per server of `backend`: HAProxy's status (UP, DOWN, ...) and sessions served. */
  servers(backend?: string): Promise<Map<string, { status: string; sessions: number }>>;
  /** Waits until HAProxy has exactly `names` UP in the API backend. */
  waitUp(names: string[]): Promise<void>;
  close(): Promise<void>;
}

export async function startCluster(n = 3, env: Record<string, string> = {}): Promise<Cluster> {
  const { target: db } = await dbTarget('postgres');
  const key = `dak_test${randomBytes(16).toString('hex')}`;
  const base = { SVC_BOOTSTRAP_KEY: key, SVC_SECRETS_KEY: randomBytes(32).toString('base64'), ...env };
  const ports = await Promise.all(Array.from({ length: n }, () => freePort()));
  const e2bPorts = await Promise.all(Array.from({ length: n }, () => freePort()));
  const replicas = await Promise.all(
    ports.map(async (port, i) => {
      const e2b = `127.0.0.1:${e2bPorts[i]}`;
      const child = await startChild(
        db,
        { ...base, SVC_E2B_ADDR: e2b, SVC_REPLICA_URL: `http://127.0.0.1:${port}` },
        { port },
      );
      return { ...child, name: `r${i + 1}`, e2bUrl: `http://${e2b}` };
    }),
  );
  const [api, e2b, stats] = await Promise.all([freePort(), freePort(), freePort()]);
  const haEnv: Record<string, string> = {
    SVC_HA_BIND: `127.0.0.1:${api}`,
    SVC_HA_E2B_BIND: `127.0.0.1:${e2b}`,
    SVC_HA_STATS_BIND: `127.0.0.1:${stats}`,
  };
  // The config names three servers; fewer replicas leave the rest pointing at a closed port (DOWN).
  for (let i = 0; i < 3; i++) {
    haEnv[`SVC_R${i + 1}`] = replicas[i] ? new URL(replicas[i].url).host : '127.0.0.1:1';
    haEnv[`SVC_R${i + 1}_E2B`] = replicas[i] ? new URL(replicas[i].e2bUrl).host : '127.0.0.1:1';
  }
  const haproxy = spawn(HAPROXY, ['-db', '-f', CONFIG], { env: { ...process.env, ...haEnv }, stdio: 'pipe' });
  let haLog = '';
  haproxy.stderr?.on('data', (c) => {
    haLog = (haLog + c).slice(-8192);
  });
  const servers = async (backend = 'replicas') => {
    const csv = await (await fetch(`http://127.0.0.1:${stats}/stats;csv`)).text();
    const out = new Map<string, { status: string; sessions: number }>();
    const head = csv.split('\n')[0].replace(/^# /, '').split(',');
    const col = (name: string) => head.indexOf(name);
    for (const line of csv.split('\n').slice(1)) {
      const f = line.split(',');
      if (f[col('pxname')] !== backend || ['FRONTEND', 'BACKEND'].includes(f[col('svname')])) continue;
      out.set(f[col('svname')], { status: f[col('status')], sessions: Number(f[col('stot')]) });
    }
    return out;
  };
  const cluster: Cluster = {
    key,
    db,
    replicas,
    url: `http://127.0.0.1:${api}`,
    e2bUrl: `http://127.0.0.1:${e2b}`,
    haproxy,
    servers,
    async waitUp(names) {
      let seen = '';
      for (let i = 0; i < 600; i++) {
        if (haproxy.exitCode !== null) throw new Error(`haproxy exited ${haproxy.exitCode}: ${haLog}`);
        const s = await servers().catch(() => null);
        if (s) {
          const up = [...s].filter(([, v]) => v.status === 'UP').map(([k]) => k);
          seen = up.join(',');
          if (seen === [...names].sort().join(',')) return;
        }
        await sleep(100);
      }
      throw new Error(`HAProxy never had exactly ${names} up (last: ${seen})`);
    },
    async close() {
      haproxy.kill('SIGKILL');
      for (const r of replicas) if (r.proc.exitCode === null) r.proc.kill('SIGKILL');
      await Promise.all(replicas.map((r) => r.exited));
    },
  };
  return cluster;
}
