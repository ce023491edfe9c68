// The shipped templates are real compose files: the control plane's own parser accepts them, and
// they carry what their descriptions promise (non-root agent first, verifier, egress, volumes).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseCompose } from '../compose/index.ts';
import { listTemplates, TEMPLATES } from './templates.ts';

const ALLOWED_IMAGES = new Set(['debian:bookworm-slim', 'postgres:16', 'redis:7']);

for (const t of TEMPLATES) {
  test(`template ${t.name} parses and keeps its promises`, () => {
    const { spec, warnings } = parseCompose(t.compose);
    assert.deepEqual(warnings, [], `warnings: ${warnings.join('; ')}`);
    assert.equal(spec.services[0].name, 'main', 'the warm command runs in the first service');
    assert.equal(spec.agent?.service, 'main');
    assert.equal(spec.services[0].user, '1000:1000');
    assert.deepEqual(spec.services[0].command, ['sleep', 'infinity']);
    assert.ok(spec.services[0].volumes.includes('work:/work'));
    assert.ok(
      spec.services.every((s) => s.health !== null),
      'every service has a healthcheck',
    );
    for (const s of spec.services) assert.ok(ALLOWED_IMAGES.has(s.image), s.image);
    assert.ok(spec.verifier, 'a verifier');
    assert.equal(spec.verifier.image, 'debian:bookworm-slim');
    assert.deepEqual(spec.verifier.collect, ['/work']);
    assert.match(JSON.stringify(spec.verifier.command), /\/logs\/verifier\/reward\.txt/);
    assert.match(JSON.stringify(spec.verifier.command), /\/submission/);
    // Compose's $$ escape must have become a plain $ for the shell.
    assert.doesNotMatch(JSON.stringify(spec.verifier.command), /\$\$/);
    for (const w of t.warm ?? []) assert.doesNotMatch(w, /\s/, 'warm words survive a whitespace split');
  });
}

test('rl-environment-ops: main, db and cache, egress denied, a warm step', () => {
  const t = TEMPLATES.find((x) => x.name === 'rl-environment-ops')!;
  assert.equal(t.kind, 'rl-environment');
  const { spec } = parseCompose(t.compose);
  assert.deepEqual(
    spec.services.map((s) => [s.name, s.image]),
    [
      ['main', 'debian:bookworm-slim'],
      ['db', 'postgres:16'],
      ['cache', 'redis:7'],
    ],
  );
  assert.equal(spec.egress, 'deny');
  assert.deepEqual([...spec.volumes].sort(), ['pgdata', 'redisdata', 'work']);
  const db = spec.services[1];
  assert.ok(db.env.POSTGRES_PASSWORD);
  assert.match(db.health?.test.join(' ') ?? '', /pg_isready/);
  assert.match(spec.services[2].health?.test.join(' ') ?? '', /redis-cli ping/);
  assert.match(spec.services[0].env.TASK_SETUP, /incident\.log/);
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text, not a template.
  assert.deepEqual(t.warm, ['sh', '-c', 'eval${IFS}"$TASK_SETUP"']);
  assert.deepEqual(t.requires, ['docker', 'compose']);
});

test('agent-runtime: one service with internet access and no warm step', () => {
  const t = TEMPLATES.find((x) => x.name === 'agent-runtime')!;
  assert.equal(t.kind, 'agent');
  const { spec } = parseCompose(t.compose);
  assert.equal(spec.services.length, 1);
  assert.equal(spec.egress, 'allow');
  assert.equal(t.warm, undefined);
});

test('listTemplates filters by kind and refuses unknown kinds', () => {
  assert.deepEqual(
    listTemplates('agent').templates.map((t) => t.name),
    ['agent-runtime'],
  );
  assert.equal(listTemplates(undefined).templates.length, 2);
  assert.deepEqual(listTemplates(undefined).kinds, ['rl-environment', 'agent']);
  assert.throws(() => listTemplates('nope'), /kind must be one of rl-environment, agent/);
});

/** Runs a template's shell text with /bin/sh (dash, as in debian:bookworm-slim), paths moved under `root`. */
function sh(argv: string[], root: string, env: Record<string, string> = {}) {
  const moved = argv.map((a) => a.replaceAll(/\/(work|submission|logs)\b/g, `${root}/$1`));
  return spawnSync(moved[0], moved.slice(1), { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8' });
}

test('rl-environment-ops: the warm step writes the task and the verifier grades it', () => {
  const t = TEMPLATES.find((x) => x.name === 'rl-environment-ops')!;
  const { spec } = parseCompose(t.compose);
  const root = mkdtempSync(join(tmpdir(), 'svc-tpl-'));
  try {
    for (const d of ['work', 'submission', 'logs/verifier']) mkdirSync(join(root, d), { recursive: true });
    const setup = spec.services[0].env.TASK_SETUP.replaceAll('/work', `${root}/work`);
    const warm = sh(t.warm!, root, { TASK_SETUP: setup });
    assert.equal(warm.status, 0, warm.stderr);
    const log = readFileSync(join(root, 'work/incident.log'), 'utf8');
    assert.equal(log.split('\n').filter((l) => l.includes('level=ERROR')).length, 71);
    assert.ok(readFileSync(join(root, 'work/TASK.md'), 'utf8').includes('answer.txt'));

    const verifier = spec.verifier!.command as string[];
    const grade = (answer: string | null) => {
      rmSync(join(root, 'submission'), { recursive: true, force: true });
      mkdirSync(join(root, 'submission/work'), { recursive: true });
      if (answer !== null) writeFileSync(join(root, 'submission/work/answer.txt'), answer);
      const r = sh(verifier, root);
      assert.equal(r.status, 0, r.stderr);
      return readFileSync(join(root, 'logs/verifier/reward.txt'), 'utf8').trim();
    };
    assert.equal(grade('71\n'), '1');
    assert.equal(grade('70'), '0');
    assert.equal(grade(null), '0');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('agent-runtime: the verifier rewards a non-empty result.txt', () => {
  const t = TEMPLATES.find((x) => x.name === 'agent-runtime')!;
  const verifier = parseCompose(t.compose).spec.verifier!.command as string[];
  const root = mkdtempSync(join(tmpdir(), 'svc-tpl-'));
  try {
    mkdirSync(join(root, 'logs/verifier'), { recursive: true });
    const grade = (result: string | null) => {
      rmSync(join(root, 'submission'), { recursive: true, force: true });
      mkdirSync(join(root, 'submission/work'), { recursive: true });
      if (result !== null) writeFileSync(join(root, 'submission/work/result.txt'), result);
      assert.equal(sh(verifier, root).status, 0);
      return readFileSync(join(root, 'logs/verifier/reward.txt'), 'utf8').trim();
    };
    assert.equal(grade('done'), '1');
    assert.equal(grade(''), '0');
    assert.equal(grade(null), '0');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
