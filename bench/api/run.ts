// API benchmark: authenticated GET /v1/envs/{id} on the real control plane (SQLite file, then
// Postgres), and a bare Fastify app with one static JSON route as the ceiling of this machine.
// The servers run in this process; autocannon runs in a child process (bench/api/load.ts).
//   node bench/api/run.ts [--seconds 10] [--connections 10]
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { parseConfig } from '../../server/config/config.ts';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { startServer } from '../../server/main.ts';
import { createDatabase, findPgBin, startCluster } from '../../test/support/postgres.ts';

const { values } = parseArgs({
  options: { seconds: { type: 'string', default: '10' }, connections: { type: 'string', default: '10' } },
});
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const WARMUP_SECONDS = 2;

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

/** Drives `url` from a separate process; a warm-up run first, whose figures are dropped. */
async function load(url: string, headers: Record<string, string>): Promise<Figures> {
  const run = (seconds: number) =>
    new Promise<Figures>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          new URL('./load.ts', import.meta.url).pathname,
          JSON.stringify({ url, headers, seconds, connections: CONNECTIONS }),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      child.stdout.on('data', (c) => {
        out += c;
      });
      child.on('exit', (code) =>
        code === 0 ? resolve(JSON.parse(out) as Figures) : reject(new Error(`load generator exited ${code}`)),
      );
    });
  await run(WARMUP_SECONDS);
  const f = await run(SECONDS);
  if (f.non2xx || f.errors || f.timeouts) {
    throw new Error(
      `${url}: ${f.non2xx} non-2xx, ${f.errors} errors, ${f.timeouts} timeouts: the figures are not valid`,
    );
  }
  return f;
}

async function bare(): Promise<Figures> {
  const app = Fastify({ logger: false });
  app.get('/static', async () => ({ status: 'ok' }));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = app.server.address() as { port: number };
  try {
    return await load(`http://127.0.0.1:${port}/static`, {});
  } finally {
    await app.close();
  }
}

/** The real server on `db`: create a project, then load GET /v1/envs/{alpha id} with the API key. */
async function controlPlane(db: string): Promise<Figures> {
  const key = `dak_bench${randomBytes(16).toString('hex')}`;
  const config = parseConfig(['-addr', '127.0.0.1:0', '-db', db], { SVC_BOOTSTRAP_KEY: key });
  const server = await startServer(config, { logger: false, limits: NO_RATE_LIMITS });
  try {
    const headers = { authorization: `Bearer ${key}` };
    const r = await fetch(`${server.url}/v1/projects`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench' }),
    });
    if (r.status !== 201) throw new Error(`creating the project: ${r.status} ${await r.text()}`);
    const envId = ((await r.json()) as { environments: { ID: string }[] }).environments[0].ID;
    return await load(`${server.url}/v1/envs/${envId}`, headers);
  } finally {
    await server.close();
  }
}

function row(name: string, f: Figures, base: Figures): string {
  return `| ${name} | ${Math.round(f.rps).toLocaleString('en')} | ${f.p50} | ${f.p99} | ${(f.rps / base.rps).toFixed(2)} |`;
}

const results: [string, Figures][] = [];
const base = await bare();
results.push(['bare Fastify, static JSON route', base]);

const dir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
try {
  results.push(['svc-server, SQLite file: GET /v1/envs/{id}', await controlPlane(join(dir, 'svc.db'))]);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

if (findPgBin()) {
  const cluster = await startCluster();
  try {
    const dsn = await createDatabase(cluster.dsn, 'bench');
    results.push(['svc-server, Postgres: GET /v1/envs/{id}', await controlPlane(dsn)]);
  } finally {
    cluster.stop();
  }
} else {
  console.error('*** no Postgres server binaries: the Postgres row is skipped ***');
}

const cpu = cpus()[0]?.model ?? 'unknown cpu';
let node = process.version;
try {
  node = execFileSync(process.execPath, ['--version']).toString().trim();
} catch {}
console.log(
  `\nAPI benchmark: ${SECONDS} s per target after a ${WARMUP_SECONDS} s warm-up, ${CONNECTIONS} connections, ` +
    `${availableParallelism()} cores (${cpu}), Node ${node}\n`,
);
console.log('| target | req/s | p50 ms | p99 ms | ratio to bare |');
console.log('|---|---|---|---|---|');
for (const [name, f] of results) console.log(row(name, f, base));
