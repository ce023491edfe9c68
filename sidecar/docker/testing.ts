// Helpers shared by the Docker layer's tests: spec records, env ids and dataset directories that
// belong to one test run, and a cleanup that leaves nothing behind even when a test failed midway.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServiceRecord } from '../../protocol/spec.ts';
import type { ComposeFlavor } from './compose-tool.ts';
import { detectComposeTool } from './compose-tool.ts';
import { EngineState } from './engine.ts';
import { Stack, type StackSpec } from './stack.ts';

/** A shell loop that ends promptly on SIGTERM (as pid 1, sh ignores TERM without a trap). */
export const IDLE = 'trap "exit 0" TERM; while :; do sleep 1; done';

export function svc(name: string, image: string, over: Partial<ServiceRecord> = {}): ServiceRecord {
  return {
    name,
    image,
    env: {},
    ports: [],
    volumes: [],
    health: null,
    depends_on: {},
    command: ['sh', '-c', IDLE],
    entrypoint: null,
    user: '',
    working_dir: '',
    resources: { memory_mb: 0, pids: 0, cpus: 0 },
    ...over,
  };
}

export function testEnvId(tag: string): string {
  return `env_t${tag}${randomBytes(4).toString('hex')}`;
}

export interface TestEnv {
  stack: Stack;
  /** volume → dataset directory on the host. */
  paths: Record<string, string>;
  dir: string;
}

const made: { stack: Stack; dir: string }[] = [];

/** A stack with fresh dataset directories under a temp dir; remembered for `cleanupTestEnvs`. */
export async function testEnv(
  tag: string,
  spec: StackSpec,
  flavor: ComposeFlavor = 'v2',
  extra: Partial<ConstructorParameters<typeof Stack>[0]> = {},
): Promise<TestEnv> {
  const envId = testEnvId(tag);
  const dir = mkdtempSync(join(tmpdir(), `svc-docker-${tag}-`));
  const paths: Record<string, string> = {};
  for (const v of spec.volumes) {
    paths[v] = join(dir, 'vol', v);
    mkdirSync(paths[v], { recursive: true });
  }
  const stack = new Stack({
    envId,
    dir,
    spec,
    tool: await detectComposeTool(flavor),
    volumePaths: paths,
    stopTimeoutSec: 2,
    engineState: new EngineState(),
    ...extra,
  });
  made.push({ stack, dir });
  return { stack, paths, dir };
}

/** Brings every stack made by this process down (containers, network, volumes, firewall rules). */
export async function cleanupTestEnvs(): Promise<void> {
  for (const { stack, dir } of made.splice(0)) {
    try {
      await stack.down();
    } catch (err) {
      process.stderr.write(`cleanup of ${stack.envId} failed: ${(err as Error).message}\n`);
    }
    rmSync(dir, { recursive: true, force: true });
  }
  // The (empty) chain itself stays: other test processes running at the same time use it, and
  // pruning it under them races their isolateBridge.
}

/**
 * SIGKILLs a spare exec's shell. Its pid is waited for (bounded) and must be a real one: a pid of 0
 * would signal this test process's whole process group (the runner, npm, CI's script).
 */
export async function killSpare(spare: { pid(): Promise<number> }): Promise<void> {
  let pid = 0;
  for (let i = 0; i < 100 && pid <= 1; i++) {
    pid = await spare.pid();
    if (pid <= 1) await new Promise((r) => setTimeout(r, 50));
  }
  if (pid <= 1) throw new Error(`the spare has no pid to kill (${pid})`);
  process.kill(pid, 'SIGKILL');
}
