// The [[steps]] of a Harbor multi-step task (schema 1.1) as x-svc.verifier.steps: each step is
// graded by its own tests layered over the task's tests/ (Harbor uploads the task's, then the
// step's, which win on a name clash), its [steps.verifier] env over [verifier].env, its own
// timeout, and its min_reward (Harbor's early stop). Its instruction, workdir/ (with the reserved
// setup.sh) and [steps.healthcheck] are what `svc step` hands to the agent before the step.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CliError } from './errors.ts';
import { hostEnv, isObj, type Obj, readTaskToml, seconds, workdirOf } from './task-folder.ts';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();

function stepTables(task: Obj): Obj[] | null {
  if (task.steps === undefined) return null;
  if (!Array.isArray(task.steps) || task.steps.length === 0 || !task.steps.every(isObj))
    throw new CliError('task.toml: steps must be [[steps]] tables, at least one');
  return task.steps as Obj[];
}

/** x-svc.verifier.steps for the task's [[steps]], or null for a single-step task. */
export function harborSteps(dir: string, task: Obj): Obj[] | null {
  const tables = stepTables(task);
  if (!tables) return null;
  const seen = new Set<string>();
  return tables.map((t, i) => {
    const name = typeof t.name === 'string' ? t.name : '';
    if (!NAME.test(name))
      throw new CliError(
        `task.toml: steps[${i}].name must be letters, digits, '.', '_' or '-' (got '${name}')`,
      );
    if (seen.has(name)) throw new CliError(`task.toml: step '${name}' is given twice`);
    seen.add(name);
    const base = join(dir, 'steps', name);
    if (!existsSync(join(base, 'instruction.md')))
      throw new CliError(`not a Harbor task: steps/${name}/instruction.md is missing`);
    const ownTests = isDir(join(base, 'tests'));
    if (!existsSync(join(base, 'tests', 'test.sh')) && !existsSync(join(dir, 'tests', 'test.sh')))
      throw new CliError(
        `not a Harbor task: step '${name}' has no tests/test.sh (in steps/${name}/ or the task's)`,
      );
    const verifier = isObj(t.verifier) ? t.verifier : {};
    if (t.min_reward !== undefined && typeof t.min_reward !== 'number')
      throw new CliError(
        `task.toml: step '${name}': min_reward per reward key is not supported; give one number`,
      );
    return {
      name,
      instruction: `./steps/${name}/instruction.md`,
      ...(ownTests ? { tests: `./steps/${name}/tests` } : {}),
      ...(isObj(verifier.env) ? { env: hostEnv(verifier.env) } : {}),
      ...(verifier.timeout_sec !== undefined ? { timeout_sec: seconds(verifier.timeout_sec, 600) } : {}),
      ...(typeof t.min_reward === 'number' ? { min_reward: t.min_reward } : {}),
      ...(isDir(join(base, 'workdir')) ? { workdir: `./steps/${name}/workdir` } : {}),
    };
  });
}

/** Where the converted task keeps the agent's work: [environment].workdir, else the Dockerfile's. */
function workdirIn(dir: string, env: Obj): string {
  if (typeof env.workdir === 'string' && env.workdir.startsWith('/')) return env.workdir;
  const dockerfile = join(dir, 'environment', 'Dockerfile');
  return existsSync(dockerfile) ? workdirOf(readFileSync(dockerfile, 'utf8')) : '/app';
}

export interface StepHealthcheck {
  command: string;
  interval_sec: number;
  timeout_sec: number;
  retries: number;
}

export interface LocalStep {
  name: string;
  instruction: string;
  /** The step's workdir/ folder on this machine, when it has one. */
  workdir: string | null;
  healthcheck: StepHealthcheck | null;
  /** The task's working directory in the agent service ([environment].workdir, else /app). */
  target: string;
}

/** One step of a task folder on this machine, as `svc step` needs it. */
export function localStep(dir: string, name: string): LocalStep {
  const task = readTaskToml(dir);
  const tables = stepTables(task);
  if (!tables) throw new CliError(`${dir} is not a multi-step task (task.toml has no [[steps]])`);
  const t = tables.find((x) => x.name === name);
  if (!t) {
    const names = tables.map((x) => String(x.name)).join(', ');
    throw new CliError(`unknown step '${name}'; the task's steps are ${names}`);
  }
  const env = isObj(task.environment) ? task.environment : {};
  const hc = isObj(t.healthcheck) ? t.healthcheck : null;
  if (hc && typeof hc.command !== 'string')
    throw new CliError(`step '${name}': healthcheck.command must be a string`);
  const num = (v: unknown, d: number) => (typeof v === 'number' && v >= 0 ? v : d);
  return {
    name,
    instruction: readFileSync(join(dir, 'steps', name, 'instruction.md'), 'utf8'),
    workdir: isDir(join(dir, 'steps', name, 'workdir')) ? join(dir, 'steps', name, 'workdir') : null,
    healthcheck: hc
      ? {
          command: hc.command as string,
          interval_sec: num(hc.interval_sec, 5),
          timeout_sec: num(hc.timeout_sec, 30),
          retries: Math.max(1, Math.floor(num(hc.retries, 3))),
        }
      : null,
    target: workdirIn(dir, env),
  };
}
