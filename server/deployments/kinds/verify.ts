// verify: stop, collect, snapshot, clone, grade, verdict. The agent is frozen and its declared
// paths copied; the capture becomes a healthy version; a grader fork of it runs the verifier;
// the grader fork is destroyed in the verdict. The agent environment keeps its current version.
// A refused submission grades 0 at once: no snapshot, no grader fork (each refused
// verify cost a capture and a fork for nothing); those phases are skipped with the reason.

import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { nameSuffix } from '../../../protocol/ids.ts';
import { diskLimitMb, type EnvSpec, hostFields, verifierForStep } from '../../../protocol/spec.ts';
import { getVersion, insertEnv, markVersionHealthy, updateEnv } from '../../envs/store.ts';
import { defineKind, type PhaseContext, Skip } from '../engine.ts';
import { updateDeployment } from '../store.ts';
import { send, takeSnapshot, targetAfterFailure, tookMs } from './common.ts';

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

const VerifyParams = Type.Object({
  resume: Type.Boolean(),
  /** A step of a multi-step task: graded with its own tests, env and timeout (verifierForStep). */
  step: Type.Optional(Type.String()),
  agent_service: Type.String(),
  grader_env: Type.Optional(Type.String()),
  collect: Type.Optional(
    Type.Object({
      files: Type.Number(),
      bytes: Type.Number(),
      missing: Type.Array(Type.String()),
      refused: Type.Array(Type.String()),
    }),
  ),
  grade: Type.Optional(
    Type.Object({
      reward: Nullable(Type.Number()),
      exit_code: Nullable(Type.Number()),
      source: Type.String(),
    }),
  ),
  /** For the grading record (verdict evidence). */
  snapshot: Type.Optional(Type.String()),
  processes: Type.Optional(Type.Array(Type.String())),
  verifier_image: Type.Optional(Type.String()),
  tests_digest: Type.Optional(Nullable(Type.String())),
});
export type VerifyParams = Static<typeof VerifyParams>;

type Ctx = PhaseContext<unknown, VerifyParams>;

const NO_VERIFIER = 'version declares no agent service and verifier';

async function spec(ctx: Ctx): Promise<EnvSpec & { verifier: NonNullable<EnvSpec['verifier']> }> {
  const v = await ctx.version(NO_VERIFIER);
  if (!v.Spec.verifier || !v.Spec.agent) throw new Error(NO_VERIFIER);
  return v.Spec as EnvSpec & { verifier: NonNullable<EnvSpec['verifier']> };
}

async function stop(ctx: Ctx) {
  return { agent_service: ctx.params.agent_service, mode: 'pause' };
}

async function collect(ctx: Ctx) {
  const env = await ctx.env();
  const s = await spec(ctx);
  const r = await send(ctx, await ctx.target(env.HostID), env.ID, 'verify.collect', {
    id: ctx.dep.ID,
    agent_service: ctx.params.agent_service,
    collect: s.verifier.collect,
    // A refused submission skips the snapshot that would unpause the agent: collect does it.
    resume: ctx.params.resume,
  });
  ctx.params.collect = { files: r.files, bytes: r.bytes, missing: r.missing, refused: r.refused };
  ctx.params.processes = r.processes ?? [];
  return ctx.params.collect;
}

const refused = (ctx: Ctx) => (ctx.params.collect?.refused.length ?? 0) > 0;
const SKIP_REFUSED = { reason: 'submission refused; graded 0 without a capture or a grader' };

async function snapshot(ctx: Ctx) {
  if (refused(ctx)) return new Skip(SKIP_REFUSED);
  const env = await ctx.env();
  const keep = ctx.params.resume ? [] : [ctx.params.agent_service];
  const evidence = await takeSnapshot(ctx, env.HostID, env.ID, ctx.dep.VersionID, keep);
  await markVersionHealthy(ctx.deps.db, ctx.dep.VersionID, evidence.snapshot);
  ctx.params.snapshot = evidence.snapshot;
  return evidence;
}

async function clone(ctx: Ctx) {
  if (refused(ctx)) return new Skip(SKIP_REFUSED);
  const env = await ctx.env();
  const s = await spec(ctx);
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID);
  const grader = await insertEnv(ctx.deps.db, {
    projectId: env.ProjectID,
    teamId: ctx.dep.TeamID,
    name: `${env.Name}-verify-${nameSuffix(6)}`,
    stage: 'verify',
    hostId: env.HostID,
    parentVersionId: ctx.dep.VersionID,
    currentVersionId: ctx.dep.VersionID,
    status: 'deploying',
  });
  ctx.params.grader_env = grader.ID;
  await updateDeployment(ctx.deps.db, ctx.dep.ID, { targetEnvId: grader.ID });
  const r = await send(ctx, await ctx.target(env.HostID), grader.ID, 'env.fork', {
    from_env: env.ID,
    from_snapshot: v?.Snapshot || ctx.dep.VersionID,
    services: s.services,
    volumes: s.volumes,
    egress: s.egress,
    agent: s.agent?.service ?? '',
    disk_mb: diskLimitMb(s),
    ...hostFields(s),
  });
  await updateEnv(ctx.deps.db, grader.ID, { status: 'running', endpoints: r.endpoints });
  return { grader_env: grader.ID, forked_in_ms: r.forked_in };
}

async function grade(ctx: Ctx) {
  if (refused(ctx)) {
    ctx.params.grade = { reward: 0, exit_code: null, source: 'refused' };
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
  const verifier = verifierForStep(s.verifier, ctx.params.step);
  const graderId = ctx.params.grader_env ?? '';
  const env = await ctx.env();
  const r = await send(
    ctx,
    await ctx.target(env.HostID),
    graderId,
    'verify.run',
    { id: ctx.dep.ID, verifier, refused: false },
    (verifier.timeout_sec + 60) * 1000,
  );
  ctx.params.grade = { reward: r.reward, exit_code: r.exit_code, source: r.source };
  ctx.params.verifier_image = r.verifier_image ?? '';
  ctx.params.tests_digest = r.tests_digest ?? null;
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
  const graderId = ctx.params.grader_env || ctx.dep.TargetEnvID;
  if (!graderId) return;
  try {
    const env = await ctx.env();
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
    snapshot: ctx.params.snapshot ?? null,
    context: v?.Spec.context?.sha256 ?? null,
    verifier_image: ctx.params.verifier_image || null,
    tests: ctx.params.tests_digest ?? null,
    processes: ctx.params.processes ?? [],
  };
}

/**
 * The step graded and Harbor's early stop: with a min_reward, a step that scores below it (or
 * fails to grade) ends the task, and the remaining steps are not worth running.
 */
async function stepRecord(ctx: Ctx, reward: number | null, failure: unknown) {
  const v = await getVersion(ctx.deps.db, ctx.dep.TeamID, ctx.dep.VersionID).catch(() => undefined);
  const step = v?.Spec.verifier?.steps?.find((x) => x.name === ctx.params.step);
  const min = step?.min_reward ?? null;
  const below = min !== null && (Boolean(failure) || reward === null || reward < min);
  return { step: ctx.params.step, min_reward: min, early_stop: below };
}

async function verdict(ctx: Ctx, failure: unknown) {
  await destroyGrader(ctx);
  const c = ctx.params.collect;
  const g = ctx.params.grade;
  const evidence = {
    reward: failure ? null : (g?.reward ?? null),
    source: g?.source ?? '',
    exit_code: g?.exit_code ?? null,
    refused: refused(ctx),
    missing: c?.missing ?? [],
    agent_frozen: !ctx.params.resume,
    took_ms: tookMs(ctx),
    ...(await gradingRecord(ctx)),
    ...(ctx.params.step === undefined ? {} : await stepRecord(ctx, g?.reward ?? null, failure)),
  };
  return { status: failure ? ('failed' as const) : ('succeeded' as const), evidence };
}

export const verifyKind = defineKind<unknown, VerifyParams>({
  kind: 'verify',
  params: VerifyParams,
  phases: [
    { name: 'stop', run: stop },
    { name: 'collect', run: collect },
    { name: 'snapshot', run: snapshot },
    { name: 'clone', run: clone },
    { name: 'grade', run: grade },
  ],
  verdict,
});
