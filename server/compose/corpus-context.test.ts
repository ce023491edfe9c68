// The shared corpus deployed the way a user deploys it: with the compose file's directory as the
// project context. The corpus holds the compose files only, so each project's files are stubbed
// (every referenced path exists) and the three projects whose repositories ship a .env get one.
// Prints the count; at least 25 of 39 parse, and every remaining refusal is for a host-level
// reason (or a file that is not the project's own).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ComposeError, parseCompose } from './index.ts';
import { stubContext } from './project-testing.ts';
import { assertValidSpec } from './testing.ts';

const DIR = '/work/shared/corpus/compose';

const TEMPORAL_ENV =
  'ELASTICSEARCH_VERSION=7.17.27\nPOSTGRESQL_VERSION=16\nTEMPORAL_VERSION=1.29\nTEMPORAL_ADMINTOOLS_VERSION=1.29\n' +
  'TEMPORAL_UI_VERSION=2.40\nPOSTGRES_USER=temporal\nPOSTGRES_PASSWORD=temporal\nPOSTGRES_DEFAULT_PORT=5432\n';
/** `.env` files of the upstream repositories (versions and credentials only). */
const DOTENV: Record<string, string> = {
  'temporal__docker-compose.yaml': TEMPORAL_ENV,
  'temporal__multirole.yaml': TEMPORAL_ENV,
  'n8n-hosting__with-postgres-and-worker.yaml':
    'N8N_VERSION=1.100.0\nPOSTGRES_USER=n8n\nPOSTGRES_PASSWORD=p\nPOSTGRES_DB=n8n\n' +
    'POSTGRES_NON_ROOT_USER=u\nPOSTGRES_NON_ROOT_PASSWORD=q\nENCRYPTION_KEY=k\nRUNNERS_AUTH_TOKEN=t\n',
};

/** What the files still refused are refused for: the host, or paths that are not the project's. */
const REFUSED: Record<string, string> = {
  'ade-bench__default.yaml': "volumes ':'", // the harness's host log paths, unset
  'agentbench__extra.yaml': 'network_mode: host is refused',
  'awesome-compose__pihole-cloudflared-DoH.yaml': 'cap_add is refused',
  'awesome-compose__wasmedge-kafka-mysql.yaml': 'runtime: io.containerd.wasmedge.v1 is refused',
  'compose-go__full-example.yaml': "driver 'flocker' is refused",
  'openhands__docker-compose.yaml': "'/var/run/docker.sock:/var/run/docker.sock' is a host bind mount",
  'sentry-self-hosted__docker-compose.yaml': 'external: is refused',
  'sourcegraph-docker__docker-compose.yaml': "leaves the project directory ('..' past its root)",
  'terminal-bench-datasets__aider-polyglot-cpp-allergies.yaml': "volumes ':'",
  'terminal-bench-datasets__swebench-astropy-12907.yaml': "volumes ':'",
  'terminal-bench-task-template__goutham-as-27-09-2025.yaml': "volumes ':'",
};

function outcome(file: string): 'parsed' | string {
  const project = stubContext();
  if (DOTENV[file]) {
    const real = project.entries;
    project.entries = new Map(real);
    project.entries.get = (k: string) => (k === '.env' ? { kind: 'file', size: 300 } : real.get(k));
    project.entries.has = (k: string) => project.entries.get(k) !== undefined;
    const files = project.files;
    project.files.get = (k: string) =>
      k === '.env' ? DOTENV[file] : (Map.prototype.get.call(files, k) ?? '');
  }
  try {
    const { spec } = parseCompose(readFileSync(join(DIR, file), 'utf8'), { project });
    assertValidSpec(spec);
    return 'parsed';
  } catch (err) {
    if (!(err instanceof ComposeError)) throw err;
    return err.message;
  }
}

describe('compose corpus with project contexts', () => {
  const files = readdirSync(DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort();

  it('at least 25 of the 39 files parse; the rest are refused for host-level reasons', () => {
    assert.equal(files.length, 39);
    const results = new Map(files.map((f) => [f, outcome(f)]));
    const parsed = files.filter((f) => results.get(f) === 'parsed');
    console.log(`corpus with contexts: ${parsed.length} of ${files.length} compose files parse`);
    for (const f of files) {
      const r = results.get(f) as string;
      if (REFUSED[f]) assert.ok(r.includes(REFUSED[f]), `${f}: ${r}`);
      else assert.equal(r, 'parsed', f);
    }
    assert.ok(parsed.length >= 25, `${parsed.length} parse`);
  });

  it('a built service gets a content tag, relative binds and file secrets mount from the context', () => {
    const project = stubContext();
    const text = readFileSync(join(DIR, 'awesome-compose__nginx-golang-postgres.yaml'), 'utf8');
    const { spec } = parseCompose(text, { project });
    const backend = spec.services.find((s) => s.name === 'backend');
    assert.match(backend?.image ?? '', /^svc-build:[0-9a-f]{64}$/);
    assert.deepEqual(backend?.build, {
      context: 'backend',
      dockerfile: 'Dockerfile',
      args: {},
      target: 'builder',
    });
    const db = spec.services.find((s) => s.name === 'db');
    assert.deepEqual(db?.binds, [
      { source: 'db/password.txt', target: '/run/secrets/db-password', read_only: true },
    ]);
    assert.ok(spec.volumes.includes('svc.context'));
  });
});
