// A Harbor task folder (task.toml, instruction.md, environment/ with a Dockerfile and/or a
// docker-compose.yaml, tests/, optional solution/; or steps/ for a multi-step task) as one compose
// file whose context is the task folder itself: the agent service is `main` (built from environment/ unless it names an image),
// resources and network from [environment], the verifier from [verifier] running tests/test.sh as
// root inside `main` of the grader's fork with tests/ mounted at /tests there only. The compose
// paths of environment/docker-compose.yaml are rebased onto environment/.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { CliError } from './errors.ts';
import { harborSteps } from './harbor-steps.ts';
import {
  hostEnv,
  isObj,
  lit,
  type Obj,
  read,
  readTaskToml,
  resolveHostVars,
  seconds,
  workdirOf,
} from './task-folder.ts';

/** The agent's user when [agent].user does not name one: the agent never runs as root. */
export const DEFAULT_AGENT_USER = '1000:1000';
const RUN_TESTS =
  'cd /app 2>/dev/null || cd /; if command -v bash >/dev/null 2>&1; then exec bash /tests/test.sh; else exec sh /tests/test.sh; fi';

const rebase = (p: string) => {
  if (p.startsWith('/') || /^[a-z]+:\/\//i.test(p)) return p;
  const rest = p.replace(/^\.\//, '');
  return rest === '' || rest === '.' ? './environment' : `./environment/${rest}`;
};
const relative = (p: string) => p.startsWith('./') || p.startsWith('../') || p === '.' || p === '..';

/** Paths of environment/docker-compose.yaml are relative to environment/; the context is the task folder. */
function rebaseService(svc: Obj): void {
  if (typeof svc.build === 'string') svc.build = rebase(svc.build);
  else if (isObj(svc.build)) svc.build.context = rebase(String(svc.build.context ?? '.'));
  if (Array.isArray(svc.volumes)) {
    svc.volumes = svc.volumes.map((v) => {
      if (typeof v === 'string' && relative(v.split(':')[0])) return rebase(v);
      if (isObj(v) && typeof v.source === 'string' && relative(v.source))
        return { ...v, source: rebase(v.source) };
      return v;
    });
  }
  const envFiles = svc.env_file;
  if (typeof envFiles === 'string') svc.env_file = rebase(envFiles);
  else if (Array.isArray(envFiles))
    svc.env_file = envFiles.map((e) =>
      typeof e === 'string' ? rebase(e) : isObj(e) ? { ...e, path: rebase(String(e.path)) } : e,
    );
}

export const WORKDIR_OWNER = 'svc-workdir-owner';

/**
 * Harbor and Terminal-Bench run the agent as root, so their images leave the work root-owned;
 * svc's agent is not root, so a one-shot service of the same image gives the work volume to the
 * agent's user before main starts (and again on every fork, which restarts the stack).
 */
function ownWorkdir(services: Obj, main: Obj, user: string, workdir: string): void {
  if (services[WORKDIR_OWNER] !== undefined) return;
  services[WORKDIR_OWNER] = {
    ...(main.build !== undefined ? { build: main.build } : { image: main.image }),
    user: '0',
    entrypoint: ['chown', '-R', user, workdir],
    command: [],
    volumes: [`workdir:${workdir}`],
  };
  const deps = main.depends_on;
  const map: Obj = Array.isArray(deps)
    ? Object.fromEntries(deps.map((d) => [String(d), { condition: 'service_started' }]))
    : isObj(deps)
      ? deps
      : {};
  main.depends_on = { ...map, [WORKDIR_OWNER]: { condition: 'service_completed_successfully' } };
}

export const HEADER =
  `# svc compose file for the Harbor task in this folder (svc init --from-harbor); the folder is\n` +
  '# the context: main is built from environment/, tests/ are mounted at /tests for the grader only.\n';

/** The task's compose document (x-svc keys included), for task-compose.ts or a converter to adjust. */
export function harborDoc(dir: string, opts: { testScript?: string } = {}): Obj {
  const task = readTaskToml(dir);
  const steps = harborSteps(dir, task);
  const script = opts.testScript ?? 'test.sh';
  if (!steps) read(join(dir, 'tests', script), `tests/${script}`);
  const env = isObj(task.environment) ? task.environment : {};
  const verifier = isObj(task.verifier) ? task.verifier : {};
  const agent = isObj(task.agent) ? task.agent : {};
  const composePath = ['docker-compose.yaml', 'docker-compose.yml']
    .map((f) => join(dir, 'environment', f))
    .find(existsSync);
  const dockerfile = existsSync(join(dir, 'environment', 'Dockerfile'))
    ? readFileSync(join(dir, 'environment', 'Dockerfile'), 'utf8')
    : null;
  if (!composePath && dockerfile === null && typeof env.docker_image !== 'string')
    throw new CliError('not a Harbor task: environment/ has neither a Dockerfile nor a docker-compose.yaml');

  const doc: Obj = composePath ? ((parseYaml(readFileSync(composePath, 'utf8')) as Obj) ?? {}) : {};
  const services: Obj = isObj(doc.services) ? doc.services : {};
  doc.services = services;
  for (const svc of Object.values(services)) if (isObj(svc)) rebaseService(svc);
  if (Array.isArray(doc.include))
    throw new CliError('environment/docker-compose.yaml uses include:, which svc refuses');
  for (const kind of ['secrets', 'configs'])
    if (isObj(doc[kind]))
      for (const d of Object.values(doc[kind] as Obj))
        if (isObj(d) && typeof d.file === 'string') d.file = rebase(d.file);

  const main: Obj = isObj(services.main) ? services.main : {};
  services.main = main;
  if (main.image === undefined && main.build === undefined) {
    if (typeof env.docker_image === 'string') main.image = env.docker_image;
    else main.build = { context: './environment' };
  }
  const user = agent.user === undefined ? DEFAULT_AGENT_USER : String(agent.user);
  if (user === 'root' || user === '0' || user.startsWith('0:'))
    throw new CliError(
      '[agent].user is root: svc never runs the agent as root (leave it unset or name a user)',
    );
  main.user ??= user;
  if (main.command === undefined)
    main.command = ['sh', '-c', "trap 'exit 0' TERM; while :; do sleep 1; done"];
  // The agent's work lives in a volume, so a snapshot (and the grader's fork of it) carries it.
  const workdir =
    typeof env.workdir === 'string' && env.workdir.startsWith('/')
      ? env.workdir
      : dockerfile
        ? workdirOf(dockerfile)
        : '/app';
  const volumes = Array.isArray(main.volumes) ? main.volumes : [];
  if (!volumes.some((v) => typeof v === 'string' && v.split(':')[1] === workdir))
    main.volumes = [...volumes, `workdir:${workdir}`];
  doc.volumes = { ...(isObj(doc.volumes) ? doc.volumes : {}), workdir: {} };
  ownWorkdir(services, main, user, workdir);
  if (typeof env.cpus === 'number' && env.cpus > 0) main.cpus ??= env.cpus;
  if (typeof env.memory_mb === 'number' && env.memory_mb > 0)
    main.mem_limit ??= `${Math.ceil(env.memory_mb)}m`;
  if (isObj(env.env)) {
    const vars: Obj = isObj(main.environment) ? main.environment : {};
    for (const [k, v] of Object.entries(env.env)) vars[k] ??= lit(resolveHostVars(String(v)));
    main.environment = vars;
  }

  doc['x-svc.agent.service'] = 'main';
  doc['x-svc.egress'] = env.allow_internet === false ? 'deny' : 'allow';
  const vEnv = isObj(verifier.env) ? hostEnv(verifier.env) : undefined;
  doc['x-svc.verifier'] = {
    service: 'main',
    command: ['sh', '-c', RUN_TESTS],
    timeout_sec: seconds(verifier.timeout_sec, 600),
    ...(!steps || existsSync(join(dir, 'tests')) ? { tests: './tests' } : {}),
    ...(vEnv ? { env: vEnv } : {}),
    ...(steps ? { steps } : {}),
  };
  return doc;
}
