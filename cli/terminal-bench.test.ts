// Terminal-Bench v1 and Harbor multi-step task folders of the shared corpus (completed with the
// files the corpus leaves out) as compose files the control plane accepts: the client is main, the
// harness's log mounts are volumes, run-tests.sh and tests/ are the grader's, the parser grades;
// [[steps]] become x-svc.verifier.steps and `svc step` reads a step's instruction and workdir.
import assert from 'node:assert/strict';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { parse } from 'yaml';
import { parseCompose } from '../server/compose/index.ts';
import { contextOf } from '../server/compose/project-testing.ts';
import { localStep } from './harbor-steps.ts';
import { harborCompose } from './task-compose.ts';

const TASKS = '/work/shared/corpus/tasks';
const root = mkdtempSync(join(tmpdir(), 'svc-cli-tbench-'));
after(() => rmSync(root, { recursive: true, force: true }));

function task(name: string, files: Record<string, string>): string {
  const dir = join(root, name);
  cpSync(join(TASKS, name), dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

function filesUnder(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else out[relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return out;
}

describe('Terminal-Bench v1 task folders', () => {
  it("polyglot_cpp_allergies: client is main, logs are volumes, the tests and run-tests.sh are the grader's", () => {
    const dir = task('terminal-bench-v1__polyglot_cpp_allergies', {
      Dockerfile: 'FROM busybox\nWORKDIR /app\nCOPY allergies.h /app/\n',
      'allergies.h': '#pragma once\n',
      'run-tests.sh': 'pytest $TEST_DIR/test_outputs.py -rA\n',
      'tests/test_outputs.py': 'def test_x(): pass\n',
      'solution.sh': 'true\n',
    });
    const t = harborCompose(dir);
    try {
      const doc = parse(t.compose);
      const main = doc.services.main;
      assert.equal(doc.services.client, undefined);
      assert.deepEqual(main.build, { context: './environment', dockerfile: 'Dockerfile' });
      assert.equal(main.image, undefined);
      assert.equal(main.container_name, undefined);
      assert.deepEqual(main.volumes, ['tb-logs:/logs', 'tb-agent-logs:/agent-logs', 'workdir:/app']);
      assert.ok(main.environment.includes('TEST_DIR=/tests'), main.environment);
      assert.equal(main.user, '1000:1000');
      const v = doc['x-svc.verifier'];
      assert.deepEqual([v.service, v.tests, v.parser, v.timeout_sec], ['main', './tests', 'pytest', 1800]);
      assert.match(v.command[2], /bash \/tests\/run-tests\.sh/);
      const staged = filesUnder(t.root);
      assert.deepEqual(Object.keys(staged).sort(), [
        'environment/Dockerfile',
        'environment/allergies.h',
        'environment/docker-compose.yaml',
        'instruction.md',
        'task.toml',
        'tests/run-tests.sh',
        'tests/test_outputs.py',
      ]);
      assert.match(staged['instruction.md'], /allergy score/);
      // The control plane accepts it with the staged folder as the context.
      const { spec } = parseCompose(t.compose, { project: contextOf(staged) });
      assert.equal(spec.verifier?.parser, 'pytest');
      assert.equal(spec.services.find((s) => s.name === 'main')?.resources.cpus, 1);
    } finally {
      t.done();
    }
  });

  it('astropy-12907 (swebench parser, no build context) converts; unknown parsers and harness names are refused', () => {
    const dir = task('terminal-bench-v1__astropy__astropy-12907', {
      Dockerfile: 'FROM busybox\nWORKDIR /testbed\n',
      'run-tests.sh': 'echo "SWEBench results starts here"\n',
    });
    const t = harborCompose(dir);
    const doc = parse(t.compose);
    t.done();
    assert.equal(doc['x-svc.verifier'].parser, 'swebench');
    assert.deepEqual(doc.services.main.volumes, [
      'tb-logs:/logs',
      'tb-agent-logs:/agent-logs',
      'workdir:/testbed',
    ]);
    writeFileSync(join(dir, 'task.yaml'), 'instruction: x\nparser_name: mlebench\n');
    assert.throws(() => harborCompose(dir), /parser_name mlebench is not supported/);
    writeFileSync(join(dir, 'task.yaml'), 'instruction: x\n');
    writeFileSync(
      join(dir, 'docker-compose.yaml'),
      'services:\n  client:\n    build: .\n    network_mode: $' + '{T_BENCH_NETWORK}\n',
    );
    assert.throws(() => harborCompose(dir), /\$\{T_BENCH_NETWORK\} is not something svc provides/);
    rmSync(join(dir, 'run-tests.sh'));
    assert.throws(() => harborCompose(dir), /run-tests.sh is missing/);
  });
});

describe('Harbor multi-step task folders', () => {
  const dir = task('harbor-cookbook__multi-step', {
    'environment/Dockerfile': 'FROM busybox\nWORKDIR /app\n',
    'tests/helpers.sh': 'pass() { echo 1 > /logs/verifier/reward.txt; }\n',
    'steps/scaffold/tests/test.sh': '. /tests/helpers.sh; pass\n',
    'steps/implement/tests/test.sh': '. /tests/helpers.sh; pass\n',
    'steps/implement/tests/expected.txt': 'Hello, Harbor!\n',
    'steps/implement/workdir/config.txt': 'Harbor\n',
    'steps/implement/workdir/setup.sh': 'rm -- "$0"\n',
    'steps/document/tests/test.sh': '. /tests/helpers.sh; pass\n',
  });

  it('[[steps]] become x-svc.verifier.steps in order, with their tests, env, timeouts and min_reward', () => {
    const t = harborCompose(dir);
    const doc = parse(t.compose);
    const v = doc['x-svc.verifier'];
    assert.equal(v.tests, './tests');
    assert.deepEqual(doc.services.main.volumes, ['workdir:/app']);
    assert.deepEqual(doc.services.main.environment, { GREETER_PROJECT: 'hello-multi-step-full' });
    assert.deepEqual(v.steps, [
      {
        name: 'scaffold',
        instruction: './steps/scaffold/instruction.md',
        tests: './steps/scaffold/tests',
        timeout_sec: 30,
        min_reward: 1,
      },
      {
        name: 'implement',
        instruction: './steps/implement/instruction.md',
        tests: './steps/implement/tests',
        env: { EXPECTED_NAME: 'Harbor', EXPECTED_GREETING: 'Hello, Harbor!' },
        timeout_sec: 30,
        min_reward: 0.5,
        workdir: './steps/implement/workdir',
      },
      {
        name: 'document',
        instruction: './steps/document/instruction.md',
        tests: './steps/document/tests',
        timeout_sec: 30,
      },
    ]);
    const { spec } = parseCompose(t.compose, { project: contextOf(filesUnder(dir)) });
    assert.deepEqual(
      spec.verifier?.steps?.map((s) => s.name),
      ['scaffold', 'implement', 'document'],
    );
  });

  it("a step's instruction, workdir and healthcheck for svc step; unknown steps are refused", () => {
    const s = localStep(dir, 'implement');
    assert.match(s.instruction, /config\.txt/);
    assert.equal(s.workdir, join(dir, 'steps', 'implement', 'workdir'));
    assert.deepEqual(s.healthcheck, {
      command: 'test -x /app/greet.sh',
      interval_sec: 1,
      timeout_sec: 5,
      retries: 3,
    });
    assert.equal(s.target, '/app');
    assert.equal(localStep(dir, 'scaffold').workdir, null);
    assert.throws(
      () => localStep(dir, 'deploy'),
      /unknown step 'deploy'; the task's steps are scaffold, implement, document/,
    );
  });
});

describe('svc init --from-harbor with a Terminal-Bench task', () => {
  it("writes the task in Harbor's layout next to it, with compose.yaml, and never overwrites", async () => {
    const { init } = await import('./commands/templates.ts');
    const dir = task('terminal-bench-v1__polyglot_cpp_allergies', {
      Dockerfile: 'FROM busybox\nWORKDIR /app\n',
      'run-tests.sh': 'pytest $TEST_DIR/test_outputs.py -rA\n',
      'tests/test_outputs.py': 'def test_x(): pass\n',
    });
    let out = '';
    const io = { out: (s: string) => (out += s), err: () => {}, json: () => {}, tty: false };
    const ctx = { flags: { 'from-harbor': dir, out: 'compose.yaml' }, args: [], io } as never;
    assert.equal(await init.run(ctx), 0);
    assert.match(out, /wrote .*-svc\/ \(the Terminal-Bench task/);
    const staged = filesUnder(`${dir}-svc`);
    assert.ok(staged['compose.yaml'].includes('parser: pytest'));
    assert.ok('tests/run-tests.sh' in staged && 'environment/Dockerfile' in staged);
    await assert.rejects(() => init.run(ctx), /already exists: not overwriting it/);
  });
});
