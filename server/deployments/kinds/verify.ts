// verify: stop, collect, snapshot, clone, grade, verdict. The agent is frozen and its declared
// paths copied; the capture becomes a healthy version; a grader fork of it runs the verifier;
// the grader fork is destroyed in the verdict. The agent environment keeps its current version.
import { randomBytes } from 'node:crypto';
import type { EnvSpec } from '../../../protocol/spec.ts';
import { getEnv, getVersion, insertEnv, markVersionHealthy, updateEnv } from '../../envs/store.ts';
import type { KindDef, PhaseContext } from '../engine.ts';
import { updateDeployment } from '../store.ts';
import { send, targetAfterFailure, targetOf, tookMs } from './common.ts';
import { takeSnapshot } from './snapshot.ts';

interface VerifyParams {
  resume: boolean;
  agent_service: string;
  grader_env?: string;
  collect?: { files: number; bytes: number; missing: string[]; refused: string[] };
  grade?: { reward: number | null; exit_code: number | null; source: string };
}

type Ctx = PhaseContext<unknown>;
const p = (ctx: Ctx) => ctx.params as unknown as VerifyParams;

async function agentEnv(ctx: Ctx) {
  const env = await getEnv(ctx.deps.db, ctx.dep.TeamID, ctx.dep.EnvID);
  if (!env) throw new Error('environment no longer exists');
  return env;
}

async function spec(ctx: Ctx): Promise<EnvSpec & { verifier: NonNullable<EnvSpec['verifier']> }> {
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  if (!v?.Spec.verifier || !v.Spec.agent) throw new Error('version declares no agent service and verifier');
  return v.Spec as EnvSpec & { verifier: NonNullable<EnvSpec['verifier']> };
}

async function stop(ctx: Ctx) {
  return { agent_service: p(ctx).agent_service, mode: 'pause' };
}

async function collect(ctx: Ctx) {
  const env = await agentEnv(ctx);
  const s = await spec(ctx);
  const r = await send(ctx, await targetOf(ctx, env.HostID), env.ID, 'verify.collect', {
    id: ctx.dep.ID,
    agent_service: p(ctx).agent_service,
    collect: s.verifier.collect,
  });
  p(ctx).collect = { files: r.files, bytes: r.bytes, missing: r.missing, refused: r.refused };
  return p(ctx).collect;
}

async function snapshot(ctx: Ctx) {
  const env = await agentEnv(ctx);
  const keep = p(ctx).resume ? [] : [p(ctx).agent_service];
  const evidence = await takeSnapshot(ctx, env.HostID, env.ID, ctx.dep.VersionID, keep);
  await markVersionHealthy(ctx.deps.db, ctx.dep.VersionID, evidence.snapshot);
  return evidence;
}

async function clone(ctx: Ctx) {
  const env = await agentEnv(ctx);
  const s = await spec(ctx);
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  const grader = await insertEnv(ctx.deps.db, {
    projectId: env.ProjectID,
    teamId: ctx.dep.TeamID,
    name: `${env.Name}-verify-${randomBytes(3).toString('hex')}`,
    stage: 'verify',
    hostId: env.HostID,
    parentVersionId: ctx.dep.VersionID,
    currentVersionId: ctx.dep.VersionID,
    status: 'deploying',
  });
  p(ctx).grader_env = grader.ID;
  await updateDeployment(ctx.deps.db, ctx.dep.ID, { targetEnvId: grader.ID });
  const r = await send(ctx, await targetOf(ctx, env.HostID), grader.ID, 'env.fork', {
    from_env: env.ID,
    from_snapshot: v?.Snapshot || ctx.dep.VersionID,
    services: s.services,
    volumes: s.volumes,
    egress: s.egress,
  });
  await updateEnv(ctx.deps.db, grader.ID, { status: 'running', endpoints: r.endpoints });
  return { grader_env: grader.ID, forked_in_ms: r.forked_in };
}

async function grade(ctx: Ctx) {
  const s = await spec(ctx);
  const graderId = p(ctx).grader_env as string;
  const env = await agentEnv(ctx);
  const refused = (p(ctx).collect?.refused.length ?? 0) > 0;
  const r = await send(
    ctx,
    await targetOf(ctx, env.HostID),
    graderId,
    'verify.run',
    { id: ctx.dep.ID, verifier: s.verifier, refused },
    (s.verifier.timeout_sec + 60) * 1000,
  );
  p(ctx).grade = { reward: r.reward, exit_code: r.exit_code, source: r.source };
  return {
    reward: r.reward,
    exit_code: r.exit_code,
    stdout: r.stdout,
    stderr: r.stderr,
    source: r.source,
    ran_for: r.ran_for,
    // Spec verify table: `refused: true` when collect refused anything.
    ...(refused ? { refused: true } : {}),
  };
}

/**
 * The grader fork exists only to grade: remove it whatever happened. Its id is on the deployment
 * (TargetEnvID) before the fork is sent, so a clone cut off by a restart is removed too; a host
 * whose stream dropped is given time to come back first.
 */
async function destroyGrader(ctx: Ctx): Promise<void> {
  const graderId = p(ctx).grader_env || ctx.dep.TargetEnvID;
  if (!graderId) return;
  try {
    const env = await agentEnv(ctx);
    await send(ctx, await targetAfterFailure(ctx, env.HostID), graderId, 'env.destroy', {});
    await updateEnv(ctx.deps.db, graderId, { status: 'destroyed', endpoints: {} });
  } catch (err) {
    ctx.deps.log.warn(
      { deployment: ctx.dep.ID, env: graderId, err: (err as Error).message },
      'grader fork teardown failed; it is marked failed',
    );
    await updateEnv(ctx.deps.db, graderId, { status: 'failed' });
  }
}

async function verdict(ctx: Ctx, failure: unknown) {
  await destroyGrader(ctx);
  const c = p(ctx).collect;
  const g = p(ctx).grade;
  const evidence = {
    reward: failure ? null : (g?.reward ?? null),
    source: g?.source ?? '',
    exit_code: g?.exit_code ?? null,
    refused: (c?.refused.length ?? 0) > 0,
    missing: c?.missing ?? [],
    agent_frozen: !p(ctx).resume,
    took_ms: tookMs(ctx),
  };
  return { status: failure ? ('failed' as const) : ('succeeded' as const), evidence };
}

export const verifyKind: KindDef<unknown> = {
  kind: 'verify',
  phases: [
    { name: 'stop', run: stop },
    { name: 'collect', run: collect },
    { name: 'snapshot', run: snapshot },
    { name: 'clone', run: clone },
    { name: 'grade', run: grade },
  ],
  verdict,
};
