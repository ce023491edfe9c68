// Engine API access for one compose project: its containers are found by compose's own labels,
// so nothing here depends on container names (the rendered file sets none) or on the compose tool.
import Docker from 'dockerode';
import { AGAIN, type Backoff, backoff, retry } from '../../shared/concurrency.ts';
import { getArchiveFrom, type Owner, putArchiveIn } from './archive.ts';
import type { KnownDatabase } from './checkpoint.ts';
import { DockerError, dockerMessage, ExecNotCreated, NoSuchService, statusCode } from './errors.ts';
import { checkCommand, type ExecOptions, type ExecResult, execIn } from './exec.ts';
import { demuxAll } from './mux.ts';
import { SpareExecs } from './spare-execs.ts';

export const PROJECT_LABEL = 'com.docker.compose.project';
export const SERVICE_LABEL = 'com.docker.compose.service';
const ONEOFF_LABEL = 'com.docker.compose.oneoff';
const NUMBER_LABEL = 'com.docker.compose.container-number';

export type { ExecOptions, ExecResult };

export interface ServiceContainer {
  id: string;
  service: string;
  /** Engine state: created, running, paused, restarting, exited, dead. */
  state: string;
  image: string;
  imageId: string;
}

const LAST_SEEN_MAX = 10_000;

/**
 * What a sidecar knows about its Docker engine across calls, one per sidecar context: every
 * DockerEngine of the process shares it, so a pause through any of them freezes the spares the
 * exec path would take. Only this sidecar drives its engine's containers.
 */
export class EngineState {
  /** The warm spare execs, by container id (spare.ts). */
  readonly spares = new SpareExecs();
  /**
   * The container of a project's service by `project/service`, as last listed: a hint that
   * spares the exec hot path a listing per command. Docker proves it at each use: when the exec
   * cannot be created there (container replaced, stopped, paused) nothing ran, and the exec goes
   * the listed way with its usual messages.
   */
  readonly lastSeen = new Map<string, string>();
  /** Databases recognised by their container's main process, by container id (checkpoint.ts). */
  readonly databases = new Map<string, KnownDatabase>();
  /**
   * The containers an env.pause froze, by project: the thaw (a warm-pool claim's) unpauses them
   * by id without listing the project first, one Engine API round trip fewer on the claim path,
   * where a listing waits behind whatever else the engine is doing (a pool refill's fork).
   */
  readonly held = new Map<string, ServiceContainer[]>();
  /**
   * The stay-up windows an env.create left open, by environment id (handlers/stay-up.ts): each
   * settles when its check-less containers have stayed up, or rejects with why one did not.
   */
  readonly stayUps = new Map<string, Promise<void>>();
  /** A fresh create's snapshot copied beside its start, by environment id (handlers/early-capture.ts). */
  readonly early = new Map<string, { discard(): Promise<void> }>();
}

/** A client of the local engine (DOCKER_HOST, else /var/run/docker.sock); the context keeps one. */
export function dockerClient(): Docker {
  return new Docker();
}

/**
 * How a pause the kernel could not complete is tried again. A freeze waits for every process of the
 * container to stop; one in uninterruptible I/O (a slow disk under load) holds it, and the runtime
 * gives up ("OCI runtime pause failed: unable to freeze") and thaws the container. A moment later
 * it usually freezes: 8 attempts, about 7 s of waits in all, before a verify or a snapshot fails.
 */
export interface PauseRetry {
  attempts: number;
  backoff: Backoff;
}
export const PAUSE_RETRY: PauseRetry = { attempts: 8, backoff: { baseMs: 100, capMs: 2000, jitter: 0.2 } };

/** A pause refused for a reason a later try cannot change: the container is gone, stopped or already paused. */
const finalPauseError = (err: unknown) => statusCode(err) === 404 || statusCode(err) === 409;

export class DockerEngine {
  readonly project: string;
  readonly docker: Docker;
  readonly #state: EngineState;
  readonly #pauseRetry: PauseRetry;
  constructor(project: string, docker: Docker, state: EngineState, pauseRetry: PauseRetry = PAUSE_RETRY) {
    this.project = project;
    this.docker = docker;
    this.#state = state;
    this.#pauseRetry = pauseRetry;
  }

  /** The process's spare execs (the pause path primes one). */
  get spares(): SpareExecs {
    return this.#state.spares;
  }

  /** The databases the process recognised in containers (checkpoint.ts). */
  get databases(): Map<string, KnownDatabase> {
    return this.#state.databases;
  }

  /** Every container of the project (one-off `run` containers excluded), any state, by service name. */
  async containers(): Promise<ServiceContainer[]> {
    let list: Docker.ContainerInfo[];
    try {
      list = await this.docker.listContainers({
        all: true,
        filters: { label: [`${PROJECT_LABEL}=${this.project}`] },
      });
    } catch (err) {
      throw new DockerError(`listing the containers of ${this.project}: ${dockerMessage(err)}`);
    }
    const found = list
      .filter((c) => c.Labels[ONEOFF_LABEL] !== 'True' && c.Labels[SERVICE_LABEL])
      .sort((a, b) => Number(a.Labels[NUMBER_LABEL] ?? 0) - Number(b.Labels[NUMBER_LABEL] ?? 0))
      .map((c) => ({
        id: c.Id,
        service: c.Labels[SERVICE_LABEL],
        state: c.State,
        image: c.Image,
        imageId: c.ImageID,
      }));
    // Every listing refreshes the hints: a pool member's thaw lists its stack, so the first exec
    // after a claim needs no listing of its own.
    const { lastSeen } = this.#state;
    if (lastSeen.size >= LAST_SEEN_MAX) lastSeen.clear();
    for (const c of [...found].reverse()) lastSeen.set(`${this.project}/${c.service}`, c.id);
    return found;
  }

  /** The service's container (the first replica); NoSuchService when the stack has none. */
  async find(service: string): Promise<ServiceContainer> {
    const found = (await this.containers()).find((c) => c.service === service);
    if (!found)
      throw new NoSuchService(
        `service '${service}' has no container in ${this.project}; is the environment up?`,
      );
    return found;
  }

  /** The container last listed for `service`: a hint, which a use must prove (a ready spare there does). */
  hinted(service: string): string | undefined {
    return this.#state.lastSeen.get(`${this.project}/${service}`);
  }

  async container(service: string): Promise<Docker.Container> {
    return this.docker.getContainer((await this.find(service)).id);
  }

  async exec(service: string, cmd: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const key = `${this.project}/${service}`;
    const { lastSeen } = this.#state;
    const hint = lastSeen.get(key);
    if (hint) {
      const viaSpare = await this.#onSpare(service, hint, cmd, opts);
      if (viaSpare) return viaSpare;
      try {
        return await this.#plain(service, hint, cmd, opts);
      } catch (err) {
        if (!(err instanceof ExecNotCreated)) throw err;
        lastSeen.delete(key);
      }
    }
    const c = await this.find(service);
    if (c.state !== 'running') {
      const why = c.state === 'paused' ? ' (it is paused, frozen for a snapshot or a verify)' : '';
      throw new DockerError(`exec in service '${service}': its container is ${c.state}${why}`);
    }
    if (opts.spare) this.#state.spares.dropStale(this.project, service, c.id);
    if (c.id !== hint) {
      const viaSpare = await this.#onSpare(service, c.id, cmd, opts);
      if (viaSpare) return viaSpare;
    }
    return this.#plain(service, c.id, cmd, opts);
  }

  /** A plain exec; one that could have used a spare may start the container's next (spare.ts). */
  async #plain(service: string, id: string, cmd: string[], opts: ExecOptions): Promise<ExecResult> {
    const result = await execIn(this.docker.getContainer(id), service, cmd, opts);
    if (opts.spare) this.#state.spares.afterPlain(this.docker, { project: this.project, service, id });
    return result;
  }

  /** The command run on the container's spare exec, or null when it has none ready (spare.ts). */
  async #onSpare(service: string, id: string, cmd: string[], opts: ExecOptions): Promise<ExecResult | null> {
    if (!opts.spare) return null;
    checkCommand(cmd);
    return this.#state.spares.runOn(this.docker, { project: this.project, service, id }, cmd, opts);
  }

  async putArchive(service: string, path: string, tar: Buffer, owner?: Owner): Promise<void> {
    await putArchiveIn(await this.container(service), service, path, tar, owner);
  }

  async getArchive(service: string, path: string, limit?: number): Promise<Buffer> {
    return getArchiveFrom(await this.container(service), service, path, limit);
  }

  /** Pauses the running containers of `services` (default all); already paused ones are skipped. Returns who was paused. */
  async pause(services?: string[]): Promise<string[]> {
    return this.freeze('pause', 'running', services);
  }

  /** Unpauses the paused containers of `services` (default all). Returns who was unpaused. */
  async unpause(services?: string[]): Promise<string[]> {
    const held = services ? undefined : this.#state.held.get(this.project);
    if (!held) return this.freeze('unpause', 'paused', services);
    return this.#unpauseHeld(held);
  }

  /** Whether this process paused the stack (env.pause) and has not thawed it since. */
  holdsPaused(): boolean {
    return this.#state.held.has(this.project);
  }

  /**
   * Pauses the whole stack's running containers (env.pause) and remembers them, so the thaw needs
   * no listing.
   */
  async pauseHeld(running: ServiceContainer[]): Promise<void> {
    await this.freezeEach('pause', running);
    const { held } = this.#state;
    if (held.size >= LAST_SEEN_MAX) held.clear();
    // A second pause finds nothing running: what the first froze stays on the record.
    const before = (held.get(this.project) ?? []).filter((c) => !running.some((r) => r.id === c.id));
    if (before.length || running.length) held.set(this.project, [...before, ...running]);
  }

  /**
   * Thaws what env.pause froze, by id. The listing still decides whenever the record may be stale:
   * a container that could not be unpaused by id (removed, replaced, not paused any more) sends
   * the rest of the thaw the listed way, with its usual errors.
   */
  async #unpauseHeld(held: ServiceContainer[]): Promise<string[]> {
    this.#state.held.delete(this.project);
    const results = await Promise.allSettled(held.map((c) => this.docker.getContainer(c.id).unpause()));
    const thawed = held.filter((_c, i) => results[i].status === 'fulfilled');
    this.#state.spares.afterUnpause(thawed.map((c) => c.id));
    // The first exec after a claim takes its container from these hints, as after a listing.
    for (const c of [...thawed].reverse()) this.#state.lastSeen.set(`${this.project}/${c.service}`, c.id);
    const services = thawed.map((c) => c.service);
    if (thawed.length === held.length) return services;
    const rest = await this.freeze('unpause', 'paused');
    return [...services, ...rest.filter((s) => !services.includes(s))];
  }

  private async freeze(op: 'pause' | 'unpause', from: string, services?: string[]): Promise<string[]> {
    const all = await this.containers();
    for (const name of services ?? []) {
      if (!all.some((c) => c.service === name))
        throw new NoSuchService(`service '${name}' has no container in ${this.project}`);
    }
    const todo = all.filter((c) => (!services || services.includes(c.service)) && c.state === from);
    await this.freezeEach(op, todo);
    return todo.map((c) => c.service);
  }

  /**
   * Pauses or unpauses exactly these containers, all at once: a snapshot's frozen_for is the
   * slowest freeze, not their sum, and a caller that listed them before its freeze
   * keeps the listing out of it.
   */
  async freezeEach(op: 'pause' | 'unpause', todo: ServiceContainer[]): Promise<void> {
    if (op === 'pause') return this.#pauseEach(todo);
    const results = await Promise.allSettled(todo.map((c) => this.docker.getContainer(c.id).unpause()));
    this.#state.spares.afterUnpause(
      todo.filter((_c, i) => results[i].status === 'fulfilled').map((c) => c.id),
    );
    const failed = results.findIndex((r) => r.status === 'rejected');
    if (failed >= 0)
      throw new DockerError(
        `unpause service '${todo[failed].service}': ${dockerMessage((results[failed] as PromiseRejectedResult).reason)}`,
      );
  }

  /**
   * Pauses all of `todo`; a pause that fails is tried again (PauseRetry) while the others stay
   * frozen. On giving up, every container this call froze is thawed again before the error is
   * thrown, so a failed verify or snapshot leaves nothing paused that it paused.
   */
  async #pauseEach(todo: ServiceContainer[]): Promise<void> {
    // A frozen spare would not answer, and a spare starting during a pause deadlocks Docker:
    // none is taken or started from before the pause until after the unpause (spare.ts).
    await this.#state.spares.beforePause(
      this.project,
      todo.map((c) => c.id),
    );
    const frozen: ServiceContainer[] = [];
    let left = todo;
    await retry(
      async (n) => {
        const results = await Promise.allSettled(left.map((c) => this.docker.getContainer(c.id).pause()));
        const failed: { c: ServiceContainer; err: unknown }[] = [];
        results.forEach((r, i) => {
          if (r.status === 'fulfilled') frozen.push(left[i]);
          else failed.push({ c: left[i], err: r.reason });
        });
        if (!failed.length) return;
        const final = failed.find((f) => finalPauseError(f.err));
        if (!final && n + 1 < this.#pauseRetry.attempts) {
          left = failed.map((f) => f.c);
          return AGAIN;
        }
        const why = final ?? failed[0];
        await this.#thawAfterFailedPause(frozen, failed);
        const tries = final ? '' : ` (${n + 1} attempts)`;
        throw new DockerError(`pause service '${why.c.service}': ${dockerMessage(why.err)}${tries}`);
      },
      { delayMs: (n) => backoff(n, this.#pauseRetry.backoff) },
    );
  }

  /**
   * Thaws what a failed pause froze. A container whose own pause failed was thawed by the runtime
   * (or was never frozen); one already paused before (a refusal such as 409) stays marked paused.
   */
  async #thawAfterFailedPause(
    frozen: ServiceContainer[],
    failed: { c: ServiceContainer; err: unknown }[],
  ): Promise<void> {
    const results = await Promise.allSettled(frozen.map((c) => this.docker.getContainer(c.id).unpause()));
    this.#state.spares.afterUnpause([
      ...frozen.filter((_c, i) => results[i].status === 'fulfilled').map((c) => c.id),
      ...failed.filter((f) => statusCode(f.err) !== 409).map((f) => f.c.id),
    ]);
  }

  /** The last `lines` lines of a container's output (stdout and stderr interleaved by stream). */
  async logTail(id: string, lines = 20): Promise<string> {
    try {
      const raw = (await this.docker
        .getContainer(id)
        .logs({ stdout: true, stderr: true, tail: lines, follow: false })) as unknown as Buffer;
      const { stdout, stderr } = demuxAll(raw);
      return [stdout, stderr]
        .filter((s) => s.trim())
        .join('\n')
        .trimEnd();
    } catch (err) {
      return `(logs unavailable: ${dockerMessage(err)})`;
    }
  }

  async inspect(service: string): Promise<Docker.ContainerInspectInfo> {
    return (await this.container(service)).inspect();
  }
}
