// svc init --from-harbor / deploy --harbor: a Harbor task folder as one compose file whose
// context is the folder; and the context the CLI ships honours .dockerignore.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parse } from 'yaml';
import { needsContext, packContext } from './context.ts';
import { CliError } from './errors.ts';
import { harborCompose } from './task-compose.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-cli-harbor-'));
after(() => rmSync(root, { recursive: true, force: true }));

function folder(name: string, files: Record<string, string>): string {
  const dir = join(root, name);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('Harbor task folders', () => {
  it('main is built from environment/, resources and network from task.toml, tests for the grader only', () => {
    const dir = folder('multi', {
      'task.toml':
        '[verifier]\ntimeout_sec = 120.5\nenv = { JUDGE = "k" }\n[environment]\ncpus = 1\nmemory_mb = 2048\nallow_internet = false\n',
      'environment/Dockerfile': 'FROM busybox\nWORKDIR /work\n',
      'environment/docker-compose.yaml':
        'services:\n  main:\n    depends_on: [api]\n  api:\n    build: {context: ./api}\n    volumes: ["./conf:/conf:ro"]\n',
      'tests/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
    });
    const doc = parse(harborCompose(dir).compose);
    assert.deepEqual(doc.services.main.build, { context: './environment' });
    assert.equal(doc.services.main.user, '1000:1000');
    assert.deepEqual(doc.services.main.volumes, ['workdir:/work']);
    // The work volume is given to the agent's user by a one-shot of main's image before main starts.
    assert.deepEqual(doc.services['svc-workdir-owner'], {
      build: { context: './environment' },
      user: '0',
      entrypoint: ['chown', '-R', '1000:1000', '/work'],
      command: [],
      volumes: ['workdir:/work'],
    });
    assert.deepEqual(doc.services.main.depends_on, {
      api: { condition: 'service_started' },
      'svc-workdir-owner': { condition: 'service_completed_successfully' },
    });
    assert.equal(doc.services.main.cpus, 1);
    assert.equal(doc.services.main.mem_limit, '2048m');
    assert.deepEqual(doc.services.api.build, { context: './environment/api' });
    assert.deepEqual(doc.services.api.volumes, ['./environment/conf:/conf:ro']);
    assert.equal(doc['x-svc.agent.service'], 'main');
    assert.equal(doc['x-svc.egress'], 'deny');
    assert.deepEqual(doc['x-svc.verifier'].tests, './tests');
    assert.equal(doc['x-svc.verifier'].service, 'main');
    assert.equal(doc['x-svc.verifier'].timeout_sec, 121);
    assert.deepEqual(doc['x-svc.verifier'].env, { JUDGE: 'k' });
  });

  it('refuses folders that are not tasks and agents that run as root', () => {
    assert.throws(() => harborCompose(folder('empty', { 'README.md': '' })), /task.toml is missing/);
    const rootAgent = folder('root', {
      'task.toml': '[agent]\nuser = "root"\n',
      'environment/Dockerfile': 'FROM busybox\n',
      'tests/test.sh': '',
    });
    assert.throws(
      () => harborCompose(rootAgent),
      (e: Error) => e instanceof CliError && /never runs the agent as root/.test(e.message),
    );
  });
});

describe('the context the CLI ships', () => {
  it('is needed for build, env_file, binds and .env; not for a plain image stack', () => {
    const plain = folder('plain', { 'compose.yaml': '' });
    assert.equal(needsContext('services:\n  a:\n    image: redis:7\n', plain), false);
    assert.equal(needsContext('services:\n  a:\n    build: .\n', plain), true);
    assert.equal(needsContext('services:\n  a:\n    image: x\n    volumes: ["./c:/c"]\n', plain), true);
    assert.equal(needsContext('services:\n  a:\n    image: x\n    env_file: a.env\n', plain), true);
    assert.equal(needsContext('services:\n  a:\n    image: x\n', folder('dotenv', { '.env': 'A=1' })), true);
  });

  it('honours .dockerignore and keeps links as links', async () => {
    const dir = folder('ctx', {
      '.dockerignore': 'node_modules\n*.log\n',
      'compose.yaml': 'services: {}\n',
      'node_modules/big.js': 'x',
      'debug.log': 'x',
      'src/app.js': 'x',
    });
    execFileSync('ln', ['-s', '/etc/passwd', join(dir, 'src', 'link')]);
    const { file, done } = await packContext(dir);
    const listing = execFileSync('tar', ['-tvzf', file], { encoding: 'utf8' });
    done();
    const names = listing
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(/\s+/).slice(5).join(' '));
    assert.deepEqual(names.sort(), [
      '.dockerignore',
      'compose.yaml',
      'src',
      'src/app.js',
      'src/link -> /etc/passwd',
    ]);
  });
});
