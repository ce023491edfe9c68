// A sidecar context on a temp data dir with the real storage backend, compose tool and Docker, for
// tests that drive handlers directly (no control plane), and a runner that records results.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { type Frame, frame } from '../../protocol/frames.ts';
import type { ServiceRecord } from '../../protocol/spec.ts';
import type { SidecarContext } from '../context.ts';
import { BuildImages } from '../docker/build-gc.ts';
import { detectComposeTool } from '../docker/compose-tool.ts';
import { dockerClient, EngineState } from '../docker/engine.ts';
import { Runner } from '../runner.ts';
import { openStorage } from '../storage/index.ts';
import { handlers } from './index.ts';

export async function testContext(dataDir: string): Promise<SidecarContext> {
  return {
    dataDir,
    storage: await openStorage({ dataDir }),
    tool: await detectComposeTool('v2'),
    docker: dockerClient(),
    engineState: new EngineState(),
    builds: new BuildImages(),
    probe: {},
    log: () => {},
    readers: new Map(),
  };
}

/** An env.create payload: these services, no volumes, egress allowed, `agent` as the agent service. */
export function createPayload(services: ServiceRecord[], agent: string): Record<string, unknown> {
  return {
    version: 'ver_1',
    services,
    volumes: [],
    from_snapshot: '',
    warm: null,
    egress: 'allow',
    agent,
    disk_mb: 64,
  };
}

export interface RunResult {
  id: string;
  ok?: boolean;
  payload?: unknown;
  error?: string;
}

/** Runs commands for one env through a real Runner (results stored under <data>/commands). */
export function commandRunner(ctx: SidecarContext, envId: string, tag: string) {
  const results = new Map<string, Frame>();
  const runner = new Runner(
    ctx.dataDir,
    handlers(ctx, async () => ({}) as never),
    (f) => {
      if (f.type === 'result') results.set(f.command_id as string, f);
    },
  );
  let n = 0;
  const prefix = `cmd_${tag}${randomBytes(4).toString('hex')}_`;
  return async (kind: string, payload: Record<string, unknown>): Promise<RunResult> => {
    const id = `${prefix}${n++}`;
    await runner.handle(frame('command', { command_id: id, kind, env_id: envId, payload }));
    const r = results.get(id);
    assert.ok(r, `no result for ${kind}`);
    return { id, ok: r.ok, payload: r.payload, error: r.error ?? undefined };
  };
}
