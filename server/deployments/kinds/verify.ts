// verify: stop, collect, snapshot, clone, grade, verdict. The agent is frozen and its declared
// paths copied; the capture becomes a healthy version; a grader fork of it runs the verifier;
// the grader fork is destroyed in the verdict. The agent environment keeps its current version.
// A refused submission grades 0 at once: no snapshot, no grader fork (issue 17: each refused
// verify cost a capture and a fork for nothing); those phases are skipped with the reason.
import { randomBytes } from 'node:crypto';
import { diskLimitMb, type EnvSpec } from '../../../protocol/spec.ts';
import { getEnv, getVersion, insertEnv, markVersionHealthy, updateEnv } from '../../envs/store.ts';
import { type KindDef, type PhaseContext, Skip } from '../engine.ts';
import { updateDeployment } from '../store.ts';
import { send, targetAfterFailure, targetOf, tookMs } from './common.ts';
import { takeSnapshot } from './snapshot.ts';

interface VerifyParams {
  resume: boolean;
  agent_service: string;
  grader_env?: string;
  collect?: { files: number; bytes: number; missing: string[]; refused: string[] };
  grade?: { reward: number | null; exit_code: number | null; source: string };
  /** For the grading record (verdict evidence). */
  snapshot?: string;
  processes?: string[];
  verifier_image?: string;
  tests_digest?: string | null;
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
    // A refused submission skips the snapshot that would unpause the agent: collect does it.
    resume: p(ctx).resume,
  });
  p(ctx).collect = { files: r.files, bytes: r.bytes, missing: r.missing, refused: r.refused };
  p(ctx).processes = r.processes ?? [];
  return p(ctx).collect;
}

const refused = (ctx: Ctx) => (p(ctx).collect?.refused.length ?? 0) > 0;
const SKIP_REFUSED = { reason: 'submission refused; graded 0 without a capture or a grader' };

async function snapshot(ctx: Ctx) {
  if (refused(ctx)) return new Skip(SKIP_REFUSED);
  const env = await agentEnv(ctx);
  const keep = p(ctx).resume ? [] : [p(ctx).agent_service];
  const evidence = await takeSnapshot(ctx, env.HostID, env.ID, ctx.dep.VersionID, keep);
  await markVersionHealthy(ctx.deps.db, ctx.dep.VersionID, evidence.snapshot);
  p(ctx).snapshot = evidence.snapshot;
  return evidence;
}

async function clone(ctx: Ctx) {
  if (refused(ctx)) return new Skip(SKIP_REFUSED);
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
    agent: s.agent?.service ?? '',
    disk_mb: diskLimitMb(s),
  });
  await updateEnv(ctx.deps.db, grader.ID, { status: 'running', endpoints: r.endpoints });
  return { grader_env: grader.ID, forked_in_ms: r.forked_in };
}

async function grade(ctx: Ctx) {
  if (refused(ctx)) {
    p(ctx).grade = { reward: 0, exit_code: null, source: 'refused' };
    // Spec verify table: `refused: true` when collect refused anything.
    return {
      reward: 0,
      exit_code: null,
      stdout: '',
      stderr: '',
      source: 'refused',
      ran_for: 0,
      refused: true,
    };
  }
  const s = await spec(ctx);
  const graderId = p(ctx).grader_env as string;
  const env = await agentEnv(ctx);
  const r = await send(
    ctx,
    await targetOf(ctx, env.HostID),
    graderId,
    'verify.run',
    { id: ctx.dep.ID, verifier: s.verifier, refused: false },
    (s.verifier.timeout_sec + 60) * 1000,
  );
  p(ctx).grade = { reward: r.reward, exit_code: r.exit_code, source: r.source };
  p(ctx).verifier_image = r.verifier_image ?? '';
  p(ctx).tests_digest = r.tests_digest ?? null;
  return {
    reward: r.reward,
    exit_code: r.exit_code,
    stdout: r.stdout,
    stderr: r.stderr,
    source: r.source,
    ran_for: r.ran_for,
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

/**
 * What makes a reward reproducible and auditable: the snapshot graded, the project context digest,
 * the verifier's image id, the tests' digest and the agent's processes when it was frozen.
 */
async function gradingRecord(ctx: Ctx) {
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID).catch(() => undefined);
  return {
    snapshot: p(ctx).snapshot ?? null,
    context: v?.Spec.context?.sha256 ?? null,
    verifier_image: p(ctx).verifier_image || null,
    tests: p(ctx).tests_digest ?? null,
    processes: p(ctx).processes ?? [],
  };
}

async function verdict(ctx: Ctx, failure: unknown) {
  await destroyGrader(ctx);
  const c = p(ctx).collect;
  const g = p(ctx).grade;
  const evidence = {
    reward: failure ? null : (g?.reward ?? null),
    source: g?.source ?? '',
    exit_code: g?.exit_code ?? null,
    refused: refused(ctx),
    missing: c?.missing ?? [],
    agent_frozen: !p(ctx).resume,
    took_ms: tookMs(ctx),
    ...(await gradingRecord(ctx)),
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
