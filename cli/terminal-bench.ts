// A Terminal-Bench v1 task folder (task.yaml with the instruction, docker-compose.yaml whose
// `client` service the harness drives through T_BENCH_* variables, run-tests.sh and tests/ that the
// harness copies to $TEST_DIR=/tests before running `bash /tests/run-tests.sh`, and solution.sh)
// staged in Harbor's layout, then deployed like a Harbor task: `client` is the agent service
// `main`, the harness's log mounts are volumes of the environment (nothing of the host is
// mounted), run-tests.sh and tests/ are the grader's /tests, and the reward is Terminal-Bench's
// verdict: the task's parser (pytest, swebench) finds every test passed (sidecar/verify/parsers.ts).
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml, stringify } from 'yaml';
import { CliError } from './errors.ts';
import { HEADER, harborDoc } from './harbor.ts';
import { isObj, type Obj, read } from './task-folder.ts';

/** What the harness sets (terminal_bench/terminal/docker_compose_manager.py), as svc provides it. */
const CONTAINER_PATHS: Record<string, string> = {
  T_BENCH_TEST_DIR: '/tests',
  T_BENCH_CONTAINER_LOGS_PATH: '/logs',
  T_BENCH_CONTAINER_AGENT_LOGS_PATH: '/agent-logs',
};
/** The harness's host directories, which become volumes of the environment. */
const HOST_LOGS: Record<string, string> = {
  T_BENCH_TASK_LOGS_PATH: 'tb-logs',
  T_BENCH_TASK_AGENT_LOGS_PATH: 'tb-agent-logs',
};
const PARSERS = ['pytest', 'swebench'];
/** Files the harness keeps from the image: the grader's and the oracle's. */
const NOT_ENVIRONMENT = new Set([
  'task.yaml',
  'docker-compose.yaml',
  'docker-compose.yml',
  'run-tests.sh',
  'tests',
  'solution.sh',
  'solution.yaml',
]);
const RUN_TESTS =
  'if command -v bash >/dev/null 2>&1; then exec bash /tests/run-tests.sh; else exec sh /tests/run-tests.sh; fi';

export const isTerminalBench = (dir: string) =>
  existsSync(join(dir, 'task.yaml')) && !existsSync(join(dir, 'task.toml'));

const VAR = /\$\{(T_BENCH_[A-Z_]{1,64})\}/g;

function substitute(text: string, where: string): string {
  return text.replace(VAR, (_m, name: string) => {
    const value = CONTAINER_PATHS[name];
    if (value === undefined) throw new CliError(`${where}: \${${name}} is not something svc provides`);
    return value;
  });
}

function volume(v: unknown, where: string): unknown {
  if (typeof v !== 'string') return v;
  const m = /^\$\{(T_BENCH_[A-Z_]{1,64})\}:(.*)$/.exec(v);
  if (m && HOST_LOGS[m[1]]) return `${HOST_LOGS[m[1]]}:${substitute(m[2], where)}`;
  return substitute(v, where);
}

/** One service of the task's compose file, with the harness's variables resolved. */
function service(name: string, svc: Obj, rename: (n: string) => string): Obj {
  const where = `docker-compose.yaml: service '${name}'`;
  delete svc.container_name;
  if (typeof svc.image === 'string' && svc.image.includes('${T_BENCH_')) {
    if (svc.build === undefined)
      throw new CliError(`${where}: its image is named by the harness and it has no build:`);
    delete svc.image;
  }
  if (Array.isArray(svc.volumes)) svc.volumes = svc.volumes.map((v) => volume(v, where));
  if (Array.isArray(svc.environment))
    svc.environment = svc.environment.map((e) => (typeof e === 'string' ? substitute(e, where) : e));
  else if (isObj(svc.environment))
    for (const [k, v] of Object.entries(svc.environment))
      if (typeof v === 'string') svc.environment[k] = substitute(v, where);
  if (Array.isArray(svc.depends_on)) svc.depends_on = svc.depends_on.map((d) => rename(String(d)));
  else if (isObj(svc.depends_on))
    svc.depends_on = Object.fromEntries(Object.entries(svc.depends_on).map(([k, v]) => [rename(k), v]));
  const left = JSON.stringify(svc).match(/\$\{T_BENCH_[A-Z_]*\}/);
  if (left) throw new CliError(`${where}: ${left[0]} is not something svc provides`);
  return svc;
}

/** environment/docker-compose.yaml of the staged task: `client` is `main`. */
function composeOf(dir: string): Obj {
  const file = ['docker-compose.yaml', 'docker-compose.yml'].map((f) => join(dir, f)).find(existsSync);
  const doc = file
    ? ((parseYaml(read(file, 'docker-compose.yaml')) as Obj) ?? {})
    : { services: { client: { build: { context: '.', dockerfile: 'Dockerfile' } } } };
  const services = isObj(doc.services) ? doc.services : {};
  if (!isObj(services.client)) throw new CliError("docker-compose.yaml has no client service (the agent's)");
  if (services.main !== undefined)
    throw new CliError('docker-compose.yaml has both client and main services');
  const rename = (n: string) => (n === 'client' ? 'main' : n);
  const out: Obj = {};
  for (const [name, svc] of Object.entries(services))
    if (isObj(svc)) out[rename(name)] = service(name, svc, rename);
  // The harness's keep-alive; svc runs its own, which stops on SIGTERM.
  delete (out.main as Obj).command;
  const named = Object.values(HOST_LOGS).filter((v) => JSON.stringify(out).includes(`"${v}:`));
  doc.services = out;
  if (named.length)
    doc.volumes = {
      ...(isObj(doc.volumes) ? doc.volumes : {}),
      ...Object.fromEntries(named.map((v) => [v, {}])),
    };
  return doc;
}

function tomlString(s: string): string {
  return JSON.stringify(s);
}

/** The task in Harbor's layout under `out`: environment/, tests/ (run-tests.sh included), instruction.md, task.toml. */
export function stageTerminalBench(dir: string, out: string): { parser: string } {
  const task = (parseYaml(read(join(dir, 'task.yaml'), 'task.yaml')) as Obj) ?? {};
  if (typeof task.instruction !== 'string' || task.instruction.trim() === '')
    throw new CliError('task.yaml has no instruction');
  const parser = String(task.parser_name ?? 'pytest');
  if (!PARSERS.includes(parser))
    throw new CliError(
      `task.yaml: parser_name ${parser} is not supported (svc grades with ${PARSERS.join(', ')})`,
    );
  read(join(dir, 'run-tests.sh'), 'run-tests.sh');
  const compose = composeOf(dir);
  mkdirSync(join(out, 'environment'), { recursive: true });
  for (const name of readdirSync(dir))
    if (!NOT_ENVIRONMENT.has(name))
      cpSync(join(dir, name), join(out, 'environment', name), { recursive: true, verbatimSymlinks: true });
  mkdirSync(join(out, 'tests'));
  if (existsSync(join(dir, 'tests')))
    cpSync(join(dir, 'tests'), join(out, 'tests'), { recursive: true, verbatimSymlinks: true });
  cpSync(join(dir, 'run-tests.sh'), join(out, 'tests', 'run-tests.sh'));
  writeFileSync(join(out, 'environment', 'docker-compose.yaml'), stringify(compose));
  writeFileSync(join(out, 'instruction.md'), task.instruction);
  const timeout = (v: unknown, d: number) => (typeof v === 'number' && v > 0 ? v : d);
  writeFileSync(
    join(out, 'task.toml'),
    `# Converted by svc from the Terminal-Bench task ${tomlString(dir)}\n[verifier]\ntimeout_sec = ${timeout(task.max_test_timeout_sec, 60)}\n` +
      `[agent]\ntimeout_sec = ${timeout(task.max_agent_timeout_sec, 360)}\n`,
  );
  return { parser };
}

/** The compose document of a staged task: the verifier runs run-tests.sh and the parser grades it. */
export function terminalBenchDoc(staged: string, parser: string): Obj {
  const doc = harborDoc(staged, { testScript: 'run-tests.sh' });
  doc['x-svc.verifier'] = { ...(doc['x-svc.verifier'] as Obj), command: ['sh', '-c', RUN_TESTS], parser };
  return doc;
}

export function terminalBenchCompose(dir: string) {
  const root = join(mkdtempSync(join(tmpdir(), 'svc-tbench-')), 'task');
  const done = () => rmSync(join(root, '..'), { recursive: true, force: true });
  try {
    const { parser } = stageTerminalBench(dir, root);
    return { compose: HEADER + stringify(terminalBenchDoc(root, parser)), root, done };
  } catch (err) {
    done();
    throw err;
  }
}
