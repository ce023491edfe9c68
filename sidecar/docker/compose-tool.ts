// The compose tool: the Compose v2 CLI plugin (`docker compose`) when present, else the standalone
// v1 `docker-compose`. Both take the same file and the same `-p/-f` flags; what differs (v1 has no
// `up --wait`) is handled by the caller looking at `flavor`.
import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ComposeRunError, NoComposeTool } from './errors.ts';

export type ComposeFlavor = 'v2' | 'v1';

export interface ComposeTool {
  flavor: ComposeFlavor;
  /** Program and leading arguments: ['docker', 'compose'] or ['docker-compose']. */
  argv: string[];
  version: string;
  /**
   * What is run, when it differs from `argv`: the v2 plugin's own binary (standalone mode). Through
   * `docker compose` every call is three Go processes (the CLI, the plugin's metadata call, the
   * plugin); the binary alone is one, about a quarter of the CPU.
   */
  program?: string[];
}

const CANDIDATES: Record<ComposeFlavor, string[]> = {
  v2: ['docker', 'compose'],
  v1: ['docker-compose'],
};

interface Output {
  stdout: string;
  stderr: string;
}

/** Runs argv; errors name the command as `shown` (with the tool's usual name) when given. */
function run(argv: string[], timeoutMs: number, shown?: string[]): Promise<Output> {
  return new Promise((resolve, reject) => {
    execFile(
      argv[0],
      argv.slice(1),
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        const cause = e.killed ? `no answer within ${Math.round(timeoutMs / 1000)}s, stopped` : e.message;
        reject(new ComposeRunError(shown ?? argv, stderr, cause));
      },
    );
  });
}

/** The tool of one flavor, or null when it is not installed or does not answer `version`. */
export async function probeComposeTool(flavor: ComposeFlavor): Promise<ComposeTool | null> {
  const argv = CANDIDATES[flavor];
  try {
    const { stdout } = await run([...argv, 'version', '--short'], 20_000);
    const version = stdout.trim().split('\n')[0] ?? '';
    if (!version) return null;
    const program = flavor === 'v2' ? await pluginBinary(version) : undefined;
    return { flavor, argv, version, ...(program ? { program } : {}) };
  } catch {
    return null;
  }
}

/** The docker CLI's plugin directories, in the order it searches them. */
function pluginDirs(): string[] {
  const config = process.env.DOCKER_CONFIG || join(homedir(), '.docker');
  return [
    join(config, 'cli-plugins'),
    '/usr/local/lib/docker/cli-plugins',
    '/usr/local/libexec/docker/cli-plugins',
    '/usr/lib/docker/cli-plugins',
    '/usr/libexec/docker/cli-plugins',
  ];
}

/** The compose plugin the CLI would run, when it answers the same version on its own. */
async function pluginBinary(version: string): Promise<string[] | undefined> {
  for (const dir of pluginDirs()) {
    const path = join(dir, 'docker-compose');
    try {
      await access(path, constants.X_OK);
    } catch {
      continue;
    }
    try {
      const { stdout } = await run([path, 'version', '--short'], 20_000);
      return stdout.trim().split('\n')[0] === version ? [path] : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * The compose tool to use: `prefer` when given (and present), else v2, else v1.
 * Throws NoComposeTool naming what was tried.
 */
export async function detectComposeTool(prefer?: ComposeFlavor): Promise<ComposeTool> {
  const order: ComposeFlavor[] = prefer ? [prefer] : ['v2', 'v1'];
  for (const flavor of order) {
    const tool = await probeComposeTool(flavor);
    if (tool) return tool;
  }
  const tried = order.map((f) => CANDIDATES[f].join(' ')).join(' and ');
  throw new NoComposeTool(
    `no compose tool found (tried ${tried}): install the docker compose plugin (docker-compose-plugin) or docker-compose`,
  );
}

export interface ComposeTarget {
  project: string;
  /** The rendered compose file; omitted only for commands v2 can run from labels (down). */
  file?: string;
}

/** Runs `<tool> -p <project> [-f <file>] <args…>` and returns its output; throws ComposeRunError. */
export function runCompose(
  tool: ComposeTool,
  target: ComposeTarget,
  args: string[],
  timeoutMs = 15 * 60_000,
): Promise<Output> {
  const argv = ['--ansi', 'never', '-p', target.project];
  if (target.file) argv.push('-f', target.file);
  return run([...(tool.program ?? tool.argv), ...argv, ...args], timeoutMs, [...tool.argv, ...argv, ...args]);
}
