// The spares of one svcd process, by container id (spare.ts has one spare's life): which
// container has one, which are frozen with their container, and when the next one starts.
import type Docker from 'dockerode';
import { settledWithin } from '../../shared/concurrency.ts';
import type { ExecOptions, ExecResult } from './exec.ts';
import { MAX_SPARE_LINE, Spare } from './spare.ts';
import { spareLine } from './spare-line.ts';

/** Containers whose spare use is remembered; past it the record starts again (a first use more). */
const USED_MAX = 10_000;
/** How long a pause waits for a spare still starting in its containers (normally ~50 ms). */
export const PAUSE_WAIT_MS = 10_000;

/** The spares of this process, by container id. */
export class SpareExecs {
  /** SVC_EXEC_SPARES=0 turns spares off (benchmarks compare both ways). */
  enabled = true;
  readonly #byId = new Map<string, Spare>();
  /** Containers svcd paused (id → project): their spares are not taken, none is started. */
  readonly #frozen = new Map<string, string>();
  /**
   * Containers a spare ran a command in (id → project; bounded): `waiting` while the first one
   * left no spare behind and no second command came yet.
   */
  readonly #used = new Map<string, { project: string; waiting: boolean }>();

  /** The container's spare, started when it has none; resolves whether it is ready. */
  prepare(docker: Docker, project: string, service: string, id: string): Promise<boolean> {
    if (!this.enabled || this.#frozen.has(id)) return Promise.resolve(false);
    this.dropStale(project, service, id);
    const had = this.#byId.get(id);
    if (had) return had.ready;
    const spare = new Spare(id, project, service, (s) => {
      if (this.#byId.get(s.id) === s) this.#byId.delete(s.id);
    });
    this.#byId.set(id, spare);
    void spare.start(docker);
    return spare.ready;
  }

  /** The container's spare when it is ready, idle, not frozen (and `fits`); it is no longer kept. */
  take(id: string, fits: (s: Spare) => boolean = () => true): Spare | null {
    const spare = this.#byId.get(id);
    if (!this.enabled || spare?.state !== 'ready' || this.#frozen.has(id) || !fits(spare)) return null;
    spare.state = 'taken';
    this.#byId.delete(id);
    return spare;
  }

  /** Runs `argv` on the container's spare, then starts the next one; null when there was none to use. */
  async runOn(
    docker: Docker,
    where: { project: string; service: string; id: string },
    argv: string[],
    opts: ExecOptions,
  ): Promise<ExecResult | null> {
    // Only the container's own user, directory and environment; a huge line goes the plain way.
    if (opts.user || opts.env || opts.workingDir) return null;
    if (Buffer.byteLength(spareLine(argv, '')) > MAX_SPARE_LINE) return null;
    const spare = this.take(where.id);
    if (!spare) return null;
    try {
      return await spare.run(where.service, argv, opts);
    } finally {
      // Used: the next command of a loop finds the next spare; a first command leaves none.
      if (spare.went && !this.#firstServed(where))
        void this.prepare(docker, where.project, where.service, where.id);
    }
  }

  /**
   * After a plain exec that could have used a spare: a container whose first command a spare
   * ran is running a loop, so its next spare starts now.
   */
  afterPlain(docker: Docker, where: { project: string; service: string; id: string }): void {
    const used = this.#used.get(where.id);
    if (!used?.waiting) return;
    used.waiting = false;
    void this.prepare(docker, where.project, where.service, where.id);
  }

  /** Whether this was the first command a spare ran in the container (then it waits for a second). */
  #firstServed(where: { project: string; id: string }): boolean {
    const used = this.#used.get(where.id);
    if (used) {
      used.waiting = false;
      return false;
    }
    if (this.#used.size >= USED_MAX) this.#used.clear();
    this.#used.set(where.id, { project: where.project, waiting: true });
    return true;
  }

  /** Drops a spare of `project/service` that lives in another container than `id`. */
  dropStale(project: string, service: string, id: string): void {
    for (const s of [...this.#byId.values()])
      if (s.project === project && s.service === service && s.id !== id) s.drop();
  }

  /** Drops every spare of a compose project (env.destroy). */
  dropProject(project: string): void {
    for (const s of [...this.#byId.values()]) if (s.project === project) s.drop();
    for (const [id, u] of this.#used) if (u.project === project) this.#used.delete(id);
    for (const [id, p] of this.#frozen) if (p === project) this.#frozen.delete(id);
  }

  /**
   * Before svcd pauses these containers: no spare is taken or started in them until they are
   * unpaused, and a spare still starting there (a background refill after an exec) is waited
   * for, bounded: an exec whose runc start is frozen by a pause deadlocks Docker 20.10 (the
   * container stays paused, its inspect hangs), so a pause must never overlap one.
   */
  async beforePause(project: string, ids: string[]): Promise<void> {
    for (const id of ids) this.#frozen.set(id, project);
    const starting = ids.map((id) => this.#byId.get(id)).filter((s) => s?.state === 'starting');
    if (starting.length) await settledWithin(Promise.all(starting.map((s) => s?.ready)), PAUSE_WAIT_MS);
  }

  /** After svcd unpaused these containers: their spares may be taken again. */
  afterUnpause(ids: string[]): void {
    for (const id of ids) this.#frozen.delete(id);
  }

  /** Whether svcd holds this container paused (tests and diagnostics). */
  isFrozen(id: string): boolean {
    return this.#frozen.has(id);
  }

  /** The spare kept for a container (tests and diagnostics). */
  get(id: string): Spare | undefined {
    return this.#byId.get(id);
  }

  get size(): number {
    return this.#byId.size;
  }
}

/** SVC_EXEC_SPARES: on (default) or off (`0`, `off`, `false`); anything else is refused. */
export function sparesEnabledFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = (env.SVC_EXEC_SPARES ?? '').trim().toLowerCase();
  if (['', '1', 'on', 'true'].includes(raw)) return true;
  if (['0', 'off', 'false'].includes(raw)) return false;
  throw new Error(`SVC_EXEC_SPARES must be on or off, not '${raw.slice(0, 20)}'`);
}
