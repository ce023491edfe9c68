// `npm test`: runs every *.test.ts with node:test, after bringing up what the tiers need:
// a throwaway Postgres cluster (second storage dialect) and a check that Docker answers.
// Extra arguments narrow the run to files whose path contains one of them.
import { spawn, spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';
import { findPgBin, startCluster } from './support/postgres.ts';

const filters = process.argv.slice(2);
const files = globSync('**/*.test.ts', { exclude: (p) => p.includes('node_modules') })
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}

// Every JSON answer is checked against the schema its route declares (server/http/responses.ts).
const env: NodeJS.ProcessEnv = { ...process.env, SVC_CHECK_RESPONSES: '1' };
let stopPg = () => {};
if (!env.SVC_TEST_PG && findPgBin()) {
  try {
    const cluster = await startCluster();
    env.SVC_TEST_PG = cluster.dsn;
    stopPg = cluster.stop;
    console.error(`postgres tier: throwaway cluster at ${cluster.dsn}`);
  } catch (err) {
    console.error(`postgres tier: could not start a cluster: ${(err as Error).message}`);
  }
}
if (!env.SVC_TEST_DOCKER) {
  const info = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], {
    encoding: 'utf8',
    timeout: 15_000,
  });
  if (info.status === 0 && info.stdout.trim()) {
    env.SVC_TEST_DOCKER = '1';
    console.error(`docker tier: engine ${info.stdout.trim()}`);
  }
}

const concurrency = env.SVC_TEST_CONCURRENCY ?? '3';
const child = spawn(
  process.execPath,
  ['--test', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files],
  { stdio: 'inherit', env },
);
const forward = (sig: NodeJS.Signals) => child.kill(sig);
process.on('SIGINT', forward);
process.on('SIGTERM', forward);
child.on('exit', (code, signal) => {
  stopPg();
  process.exit(code ?? (signal ? 1 : 0));
});
