// E2B sandboxes as svc environments. A template names what to start: an image (one container, as
// `POST /v1/sandboxes {image}`), a healthy version `ver_…` (a fork of its whole stack, a warm-pool
// member when it has one) or `<project>/<env>` (its current version); `base` is the configured
// default. The sandbox is the environment named by its id; killing it destroys the environment.
// E2B's create has no runtime field: the metadata key `svc.runtime` (runc or gvisor) names it, as
// `runtime` does for POST /v1/sandboxes; the team's runtime policy applies either way.
import type { E2bNewSandboxT, E2bSandboxT } from '../../protocol/e2b.ts';
import { newId, newSecret } from '../../protocol/ids.ts';
import { KEEPER } from '../../protocol/keeper.ts';
import { isRuntime, type Runtime } from '../../protocol/spec.ts';
import type { AppContext } from '../context.ts';
import { getDeployment } from '../deployments/store.ts';
import { destroy, snapshot } from '../envs/lifecycle.ts';
import { checkAskedUnderPolicy } from '../envs/runtime-policy.ts';
import * as envStore from '../envs/store.ts';
import { BadRequest, Conflict, NotFound, SvcError, Upstream } from '../errors.ts';
import type { Caller } from '../identity/auth.ts';
import { hashSecret } from '../identity/secrets.ts';
import { findProject } from '../projects/store.ts';
import { createSandbox, DEFAULT_SANDBOX_PROJECT, type SandboxRequest } from '../sandboxes/sandboxes.ts';
import * as store from './store.ts';

/**
 * The envd version reported to the SDK, which switches features on by it: no forced user (0.4.0),
 * close stdin (0.5.2); not yet octet-stream uploads (0.5.7: streamed, without a length, which the
 * file API refuses) nor file metadata (0.6.2). It rises only with the features behind it.
 */
export const ENVD_VERSION = '0.5.2';
export const DEFAULT_TIMEOUT_SEC = 300;
export const CLIENT_ID = 'svc';
/** E2B's defaults for a sandbox's size, reported as such: svc does not size image sandboxes. */
const SIZE = { cpuCount: 2, memoryMB: 512, diskSizeMB: 2048 };
const PAUSE_TIMEOUT_MS = 60_000;
/** How long a fork waits for the snapshot of the sandbox it forks. */
const FORK_SNAPSHOT_MS = 300_000;
/** How a host says it does not have an image and cannot get it (Docker's and the compose tool's words). */
const IMAGE_MISSING =
  /pull access denied|no such image|manifest unknown|manifest for .* not found|repository does not exist|not found: manifest|failed to resolve reference|no such host|i\/o timeout|dial tcp/i;

/** The metadata key an E2B create names its runtime with. */
export const RUNTIME_METADATA = 'svc.runtime';

type Resolved = { req: SandboxRequest; project: () => Promise<string | undefined>; image: boolean };

const isoIn = (sec: number) => new Date(Date.now() + sec * 1000).toISOString();
const unknownTemplate = (t: string, why = '') =>
  new NotFound(`template '${t.slice(0, 200)}' not found${why ? `: ${why}` : ''}`);

export interface ListQuery {
  metadata: Record<string, string>;
  states: store.E2bState[];
  after: string;
  limit: number;
}

export class E2bSandboxes {
  readonly #ctx: AppContext;
  /** Called once a sandbox stops running (killed, expired, paused, or its environment gone): envd ends its calls. */
  onEnd: (id: string) => void = () => {};

  constructor(ctx: AppContext) {
    this.#ctx = ctx;
  }

  async #resolve(caller: Caller, templateID: string): Promise<Resolved> {
    const db = this.#ctx.db;
    const t = templateID === 'base' ? this.#ctx.config.e2bDefaultTemplate : templateID;
    if (t.startsWith('ver_')) {
      const v = await envStore.getVersion(db, caller.teamId, t);
      if (!v) throw unknownTemplate(templateID);
      if (!v.Healthy || !v.Snapshot)
        throw unknownTemplate(templateID, `version ${v.ID} is not a healthy snapshot`);
      return { req: { from_version: v.ID }, project: async () => v.ProjectID, image: false };
    }
    const parts = t.split('/');
    if (parts.length === 2) {
      const project = await findProject(db, caller.teamId, parts[0]);
      const env = project && (await envStore.findEnvByName(db, project.ID, parts[1]));
      if (env) {
        if (!env.CurrentVersionID)
          throw unknownTemplate(templateID, `environment ${env.ID} has no version yet`);
        return this.#resolve(caller, env.CurrentVersionID);
      }
    }
    const project = async () => (await findProject(db, caller.teamId, DEFAULT_SANDBOX_PROJECT))?.ID;
    return { req: { image: t, cmd: [...KEEPER] }, project, image: true };
  }

  /** Starts the sandbox and waits until it is healthy (E2B answers create once it runs). */
  async create(caller: Caller, body: E2bNewSandboxT, shown = body.templateID): Promise<E2bSandboxT> {
    const runtime = await this.#runtime(caller, body.metadata?.[RUNTIME_METADATA]);
    const resolved = await this.#resolve(caller, body.templateID);
    const id = newId('sbx').toLowerCase();
    const req: SandboxRequest = {
      ...resolved.req,
      name: id,
      ...(runtime ? { runtime } : {}),
      ...(resolved.image
        ? { env: body.envVars ?? {}, egress: body.allow_internet_access === false ? 'deny' : 'allow' }
        : {}),
    };
    let env: envStore.Environment | undefined;
    try {
      env = (await createSandbox(this.#ctx, caller, req)).environment;
    } catch (err) {
      await this.#discard(caller, resolved, id);
      if (resolved.image && err instanceof BadRequest) throw unknownTemplate(body.templateID, err.message);
      if (resolved.image && err instanceof Upstream && IMAGE_MISSING.test(err.message))
        throw unknownTemplate(body.templateID, 'the host does not have this image and cannot pull it');
      throw err;
    }
    if (!env) throw new Upstream(`sandbox ${id}: its environment is gone`);
    const token = newSecret('ea_');
    await store.insertSandbox(this.#ctx.db, {
      id,
      team_id: caller.teamId,
      env_id: env.ID,
      template_id: shown,
      token_hash: hashSecret(token),
      token_sealed: this.#ctx.secrets.seal(token),
      metadata: body.metadata ?? {},
      state: 'running',
      started_at: new Date().toISOString(),
      end_at: isoIn(body.timeout ?? DEFAULT_TIMEOUT_SEC),
    });
    return this.#answer(id, shown, token);
  }

  /**
   * The runtime `svc.runtime` names, checked here (a refusal is a 400 naming the key, not an
   * unknown template): a value other than runc or gvisor, or one the team's policy forbids.
   */
  async #runtime(caller: Caller, asked: string | undefined): Promise<Runtime | undefined> {
    if (asked === undefined) return undefined;
    if (!isRuntime(asked))
      throw new BadRequest(
        `metadata ${RUNTIME_METADATA} must be runc or gvisor, not '${asked.slice(0, 50)}'`,
      );
    await checkAskedUnderPolicy(this.#ctx.engine.deps.requiredRuntime, caller.teamId, asked);
    return asked;
  }

  /** A create that failed leaves nothing: its environment, when one was made, is destroyed. */
  async #discard(caller: Caller, resolved: Resolved, id: string): Promise<void> {
    const projectId = await resolved.project();
    const env = projectId ? await envStore.findEnvByName(this.#ctx.db, projectId, id) : undefined;
    if (env && env.Status !== 'destroyed' && env.Status !== 'destroying')
      await destroy(this.#ctx.db, this.#ctx.engine, caller, env.ID).catch(() => {});
  }

  #answer(id: string, templateID: string, token: string): E2bSandboxT {
    return {
      templateID,
      sandboxID: id,
      clientID: CLIENT_ID,
      envdVersion: ENVD_VERSION,
      envdAccessToken: token,
      domain: null,
    };
  }

  /** The team's sandbox; 404 for an unknown one, another team's, or one whose environment is gone. */
  async #row(caller: Caller, id: string): Promise<store.E2bSandboxRow> {
    const row = await store.getSandbox(this.#ctx.db, caller.teamId, id);
    if (!row || !(await this.#alive(row))) throw new NotFound(`sandbox ${id.slice(0, 100)} not found`);
    return row;
  }

  /**
   * False (and the row forgotten) when the environment was destroyed some other way, or failed
   * (then it is destroyed too: a sandbox leaves nothing behind).
   */
  async #alive(row: store.E2bSandboxRow): Promise<boolean> {
    const env = await envStore.getEnv(this.#ctx.db, row.team_id, row.env_id);
    if (env && env.Status !== 'destroyed' && env.Status !== 'destroying' && env.Status !== 'failed')
      return true;
    const gone = await store.deleteSandbox(this.#ctx.db, row.id);
    this.onEnd(row.id);
    if (gone && env?.Status === 'failed') await this.#destroyEnv(row);
    return false;
  }

  listed(row: store.E2bSandboxRow) {
    return {
      templateID: row.template_id,
      sandboxID: row.id,
      clientID: CLIENT_ID,
      startedAt: row.started_at,
      endAt: row.end_at,
      ...SIZE,
      metadata: row.metadata,
      state: row.state,
      envdVersion: ENVD_VERSION,
    };
  }

  async get(caller: Caller, id: string) {
    const row = await this.#row(caller, id);
    return { ...this.listed(row), envdAccessToken: this.#ctx.secrets.open(row.token_sealed), domain: null };
  }

  /** A page of the team's sandboxes matching every metadata pair, and the token of the next page. */
  async list(caller: Caller, q: ListQuery) {
    const want = Object.entries(q.metadata);
    const out: store.E2bSandboxRow[] = [];
    let after = q.after;
    for (;;) {
      const batch = await store.listSandboxes(this.#ctx.db, caller.teamId, {
        states: q.states,
        after,
        limit: 500,
      });
      for (const r of batch) {
        if (want.every(([k, v]) => r.metadata[k] === v)) out.push(r);
        if (out.length > q.limit) break;
      }
      if (out.length > q.limit || batch.length < 500) break;
      after = batch[batch.length - 1].id;
    }
    const page = out.slice(0, q.limit);
    const next = out.length > q.limit ? page[page.length - 1].id : null;
    return { items: page.map((r) => this.listed(r)), next };
  }

  /** Ends the sandbox: its row goes at once (one kill wins), its environment is destroyed. */
  async kill(caller: Caller, id: string): Promise<void> {
    const row = await this.#row(caller, id);
    if (!(await store.deleteSandbox(this.#ctx.db, row.id))) throw new NotFound(`sandbox ${id} not found`);
    this.onEnd(row.id);
    await this.#destroyEnv(row);
  }

  async #destroyEnv(row: store.E2bSandboxRow): Promise<void> {
    const caller: Caller = { teamId: row.team_id, role: 'e2b' };
    try {
      await destroy(this.#ctx.db, this.#ctx.engine, caller, row.env_id);
    } catch (err) {
      if (!(err instanceof Conflict)) throw err; // already destroyed
    }
  }

  async setTimeout(caller: Caller, id: string, sec: number): Promise<void> {
    const row = await this.#row(caller, id);
    await store.setEndAt(this.#ctx.db, row.id, isoIn(sec));
  }

  /** Connect: a paused sandbox is resumed; the timeout, when given, is extended. 201 when resumed. */
  async connect(caller: Caller, id: string, sec: number | undefined) {
    const row = await this.#row(caller, id);
    const resumed = row.state === 'paused';
    const endAt = sec === undefined ? row.end_at : isoIn(sec);
    if (resumed) {
      await this.#command(row, 'env.unpause');
      // A paused sandbox's old end has usually passed: resumed without a timeout, it gets the default.
      await store.setState(
        this.#ctx.db,
        row.id,
        'running',
        sec === undefined ? isoIn(DEFAULT_TIMEOUT_SEC) : endAt,
      );
    } else if (sec !== undefined) await store.setEndAt(this.#ctx.db, row.id, endAt);
    const token = this.#ctx.secrets.open(row.token_sealed);
    return { resumed, sandbox: this.#answer(row.id, row.template_id, token) };
  }

  /** Pause: the stack's containers are frozen (`env.pause`); 409 when already paused. */
  async pause(caller: Caller, id: string): Promise<void> {
    const row = await this.#row(caller, id);
    if (row.state === 'paused') throw new Conflict(`sandbox ${id} is already paused`);
    await store.setState(this.#ctx.db, row.id, 'paused', row.end_at);
    this.onEnd(row.id);
    try {
      await this.#command(row, 'env.pause');
    } catch (err) {
      await store.setState(this.#ctx.db, row.id, 'running', row.end_at);
      throw err;
    }
  }

  async #command(row: store.E2bSandboxRow, kind: 'env.pause' | 'env.unpause'): Promise<void> {
    const env = await envStore.getEnv(this.#ctx.db, row.team_id, row.env_id);
    if (!env) throw new NotFound(`sandbox ${row.id} not found`);
    try {
      const target = await this.#ctx.targets.of(row.team_id, env.HostID);
      await this.#ctx.dispatcher.run(target, env.ID, kind, {}, PAUSE_TIMEOUT_MS);
    } catch (err) {
      if (err instanceof SvcError) throw err;
      throw new Upstream(`sandbox ${row.id}: ${kind}: ${(err as Error).message}`);
    }
  }

  /** Usage samples: svc keeps none yet, so the list is empty (the SDK's answer for a new sandbox). */
  async metrics(caller: Caller, id: string): Promise<never[]> {
    await this.#row(caller, id);
    return [];
  }

  /** The sandbox an envd request names, while its environment lives (envd.ts checks the token and state). */
  async forEnvd(id: string): Promise<store.E2bSandboxRow | undefined> {
    const row = await store.getSandboxById(this.#ctx.db, id);
    return row && (await this.#alive(row)) ? row : undefined;
  }

  /** Kills every running sandbox whose time ran out; returns how many. */
  async sweep(): Promise<number> {
    const rows = await store.expired(this.#ctx.db, new Date().toISOString(), 100);
    let n = 0;
    for (const row of rows) {
      if (!(await store.deleteSandbox(this.#ctx.db, row.id))) continue;
      this.onEnd(row.id);
      await this.#destroyEnv(row);
      n++;
    }
    return n;
  }

  /**
   * Fork: the sandbox's whole stack is snapshotted (a new version of its environment: databases
   * checkpointed, volumes captured copy-on-write) and `count` sandboxes start from it, each
   * answered on its own: a sandbox, or why it did not start.
   */
  async fork(caller: Caller, id: string, count: number, sec: number | undefined) {
    const row = await this.#row(caller, id);
    if (row.state === 'paused') throw new Conflict(`sandbox ${id} is paused; connect to resume it first`);
    const started = await snapshot(this.#ctx.db, this.#ctx.engine, caller, row.env_id);
    const status = await this.#ctx.engine.waitFinished(started.deployment.ID, FORK_SNAPSHOT_MS);
    const dep = await getDeployment(this.#ctx.db, caller.teamId, started.deployment.ID);
    if (status !== 'succeeded' || !dep?.VersionID)
      throw new Upstream(
        `sandbox ${id}: snapshot ${started.deployment.ID} ${status ?? 'timed out'}: ${dep?.Error ?? ''}`,
      );
    const body = { templateID: dep.VersionID, timeout: sec, metadata: row.metadata };
    return Promise.all(
      Array.from({ length: count }, () =>
        this.create(caller, body, row.template_id).then(
          (sandbox) => ({ sandbox }),
          (err: Error) => ({
            error: { code: err instanceof SvcError ? err.status : 500, message: err.message },
          }),
        ),
      ),
    );
  }
}
