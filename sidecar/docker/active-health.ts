// Active health: the sidecar starts a stack's containers itself, in dependency order,
// and runs each service's healthcheck test through the Engine API every PROBE_EVERY_MS from the
// moment its container starts, instead of waiting for Docker's healthcheck `interval` (5 s in a
// typical compose file, and `depends_on: service_healthy` chains those waits).
//
// Docker keeps running its own healthcheck (the container's status stays truthful); this module
// only decides sooner. A service may be depended on when:
//   service_started                 its container runs (or is paused);
//   service_healthy                 one active check passed (no healthcheck: it runs);
//   service_completed_successfully  it exited 0.
// A service fails the start when its container exits (non-zero, or at all unless a dependant
// waits for its completion), when Docker marks it unhealthy, or when its active checks have kept
// failing past `start_period` for as long as Docker would allow (`retries` × `interval`).
import { setTimeout as sleep } from 'node:timers/promises';
import type { HealthCheck, ServiceRecord } from '../../protocol/spec.ts';
import type { DockerEngine, ServiceContainer } from './engine.ts';
import { DockerError, dockerMessage, StackUnhealthy, tail } from './errors.ts';
import { execIn } from './exec.ts';
import { KEEPER_LOOKS, provenKeeper, runsKeeper } from './keeper.ts';

export const PROBE_EVERY_MS = 150;
/** Docker's defaults for unset healthcheck fields. */
const DOCKER_INTERVAL_MS = 30_000;
const DOCKER_TIMEOUT_MS = 30_000;
const DOCKER_RETRIES = 3;

/** Milliseconds of a compose duration ('1m30s', '500ms', '2h'); 0 when empty. */
export function durationMs(text: string | undefined): number {
  if (!text) return 0;
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, ns: 0.000001 };
  let total = 0;
  let matched = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g)) {
    total += Number(m[1]) * unit[m[2]];
    matched += m[0].length;
  }
  if (matched !== text.length)
    throw new DockerError(`'${text}' is not a duration such as 5s, 1m30s or 500ms`);
  return total;
}

/** The argv Docker would run for a healthcheck test; null for none. */
export function probeCommand(h: HealthCheck | null): string[] | null {
  if (!h?.test.length || h.test[0] === 'NONE') return null;
  if (h.test[0] === 'CMD-SHELL') return ['/bin/sh', '-c', h.test.slice(1).join(' ')];
  if (h.test[0] === 'CMD') return h.test.slice(1);
  return h.test;
}

export interface ProbeOutcome {
  ok: boolean;
  output: string;
}

/** Runs a service's healthcheck test once in its container. */
export async function probeOnce(engine: DockerEngine, id: string, svc: ServiceRecord): Promise<ProbeOutcome> {
  const cmd = probeCommand(svc.health);
  if (!cmd) return { ok: true, output: '' };
  const timeoutMs = durationMs(svc.health?.timeout) || DOCKER_TIMEOUT_MS;
  try {
    const r = await execIn(engine.docker.getContainer(id), svc.name, cmd, {
      timeoutSec: Math.max(timeoutMs / 1000, 0.001),
      maxOutputBytes: 4096,
    });
    return { ok: r.exit_code === 0, output: tail(`${r.stdout}${r.stderr}`, 5) };
  } catch (err) {
    return { ok: false, output: (err as Error).message };
  }
}

type Phase = 'waiting' | 'started' | 'ready';

interface Track {
  svc: ServiceRecord;
  container: ServiceContainer;
  phase: Phase;
  startedAt: number;
  /** When the current run of failed checks past start_period began; 0 when the last one passed. */
  failingSince: number;
  probing: boolean;
  lastOutput: string;
  /** Exited 0 (a one-shot's completion). */
  completed: boolean;
  /** Seen running (not paused) by the latest look. */
  running: boolean;
  /** How long it must stay up when it has no check. */
  stayUpMs: number;
  /** Looks left for svc's keeper to prove itself steady before its window ends (0: none). */
  keeperLooks: number;
}

export interface ActiveStartOptions {
  timeoutMs: number;
  /** Called once per service as its container is started (for ordering tests and progress). */
  onStart?: (service: string) => void;
  /** Called once per service when it may be depended on. */
  onReady?: (service: string) => void;
  /**
   * A service without a check that no service of this start waits for is handed back once it
   * runs, inside its stay-up window: the window is then watched by `stayUp` (see startActive).
   */
  deferStayUp?: boolean;
  /** The stay-up window of a service without a check; PROBE_EVERY_MS unless a test widens it. */
  stayUpMs?: number;
  /** How many looks a keeper gets to prove itself steady (keeper.ts); tests widen it too. */
  keeperLooks?: number;
}

export interface ActiveStart {
  /**
   * Settles once every deferred service has stayed up its window, or rejects as the start would
   * have (its exit code and logs); null when nothing was deferred. Never left unobserved: a
   * rejection is handled here, and the caller awaits it before the stack counts as healthy.
   */
  stayUp: Promise<void> | null;
}

/**
 * Services some dependant waits on to complete (exit 0), not merely to run. Read from the whole
 * stack, never from the services one wait is about: a dependant left paused (the agent a verify
 * keeps frozen) still makes its dependency a one-shot.
 */
export function oneShots(stack: readonly ServiceRecord[]): ReadonlySet<string> {
  const out = new Set<string>();
  for (const s of stack)
    for (const [dep, d] of Object.entries(s.depends_on))
      if (d.condition === 'service_completed_successfully') out.add(dep);
  return out;
}

/** What the engine says of a container that has stopped. */
export interface ExitState {
  ExitCode: number;
  OOMKilled: boolean;
  Error: string;
}

/**
 * The one rule for a service whose container has exited, in every wait for health (a start in
 * dependency order: create, fork, rollback, restart, a pool member; the thaw after a snapshot):
 * null when it has completed (exit 0, and `oneShots` of the stack has it), else why the exit fails
 * the wait.
 */
export function exitFailure(service: string, st: ExitState, completes: ReadonlySet<string>): string | null {
  if (st.ExitCode === 0 && completes.has(service)) return null;
  const oom = st.OOMKilled ? ' (killed: out of memory)' : '';
  return `exited with code ${st.ExitCode}${oom}${st.Error ? `: ${st.Error}` : ''}`;
}

function allowedFailureMs(h: HealthCheck | null): number {
  const interval = durationMs(h?.interval) || DOCKER_INTERVAL_MS;
  const retries = h && h.retries > 0 ? h.retries : DOCKER_RETRIES;
  return interval * retries;
}

/**
 * Starts the created containers of `services` in dependency order and returns when every one is
 * ready. Throws StackUnhealthy naming the failing service (exit code, last check output, logs).
 */
export async function startActive(
  engine: DockerEngine,
  services: ServiceRecord[],
  opts: ActiveStartOptions,
): Promise<ActiveStart> {
  const deadline = Date.now() + opts.timeoutMs;
  const containers = await engine.containers();
  const completes = oneShots(services);
  const tracks = new Map<string, Track>();
  for (const svc of services) {
    const container = containers.find((c) => c.service === svc.name);
    if (!container) throw new StackUnhealthy(`${engine.project}: service '${svc.name}' has no container`);
    const running = container.state === 'running' || container.state === 'paused';
    tracks.set(svc.name, {
      svc,
      container,
      phase: running ? 'started' : 'waiting',
      startedAt: Date.now(),
      failingSince: 0,
      probing: false,
      lastOutput: '',
      completed: false,
      running: false,
      stayUpMs: opts.stayUpMs ?? PROBE_EVERY_MS,
      keeperLooks: runsKeeper(svc) && !completes.has(svc.name) ? (opts.keeperLooks ?? KEEPER_LOOKS) : 0,
    });
  }
  const fail = async (t: Track, why: string): Promise<never> => {
    const check = t.lastOutput ? `; last health check said: ${t.lastOutput}` : '';
    const logs = await engine.logTail(t.container.id, 20);
    throw new StackUnhealthy(
      `${engine.project} did not become healthy: service '${t.svc.name}' ${why}${check}\n` +
        (logs ? `last log lines of '${t.svc.name}':\n${logs}` : `('${t.svc.name}' printed nothing)`),
    );
  };
  const satisfied = (t: Track): boolean =>
    Object.entries(t.svc.depends_on).every(([dep, d]) => {
      const other = tracks.get(dep);
      if (!other) return true; // not part of this start (already running)
      if (d.condition === 'service_completed_successfully') return other.completed;
      if (d.condition === 'service_healthy') return other.phase === 'ready';
      return other.phase !== 'waiting';
    });
  const ready = (t: Track) => {
    if (t.phase === 'ready') return;
    t.phase = 'ready';
    opts.onReady?.(t.svc.name);
  };
  // The stay-up window proves a command did not fail at once; nothing needs it to be over to start
  // (no dependant waits on it), so its end can be watched while the caller goes on.
  const waitedOn = new Set(services.flatMap((s) => Object.keys(s.depends_on)));
  const deferred = (t: Track) =>
    opts.deferStayUp === true &&
    t.phase === 'started' &&
    t.running &&
    !probeCommand(t.svc.health) &&
    !completes.has(t.svc.name) &&
    !waitedOn.has(t.svc.name);

  for (;;) {
    // Everything that may start now starts at once (Docker starts containers in parallel).
    const due = [...tracks.values()].filter((t) => t.phase === 'waiting' && satisfied(t));
    await Promise.all(
      due.map(async (t) => {
        try {
          await engine.docker.getContainer(t.container.id).start();
        } catch (err) {
          if (!/already started|304/.test(dockerMessage(err)))
            await fail(t, `did not start: ${dockerMessage(err)}`);
        }
        t.phase = 'started';
        t.startedAt = Date.now();
        opts.onStart?.(t.svc.name);
      }),
    );
    const started = [...tracks.values()].filter((t) => t.phase !== 'waiting');
    const readyBefore = started.filter((t) => t.phase === 'ready').length;
    await Promise.all(started.map((t) => observe(engine, t, completes, fail, ready)));
    if ([...tracks.values()].every((t) => t.phase === 'ready' || deferred(t))) {
      const rest = [...tracks.values()].filter((t) => t.phase !== 'ready');
      return {
        stayUp: rest.length
          ? watchStayUp(rest, opts.timeoutMs, (t) => observe(engine, t, completes, fail, ready), completes)
          : null,
      };
    }
    // A service just became ready: its dependants start now, not a probe interval later.
    if (started.filter((t) => t.phase === 'ready').length > readyBefore) continue;
    if (Date.now() >= deadline) {
      const late = [...tracks.values()].find((t) => t.phase !== 'ready');
      if (late)
        await fail(
          late,
          `not ready after ${Math.round(opts.timeoutMs / 1000)}s (${late.phase}, dependencies first)`,
        );
    }
    await sleep(nextLook(tracks.values(), completes));
  }
}

/** Looks at each deferred service when its window ends, until every one is ready (or fails). */
function watchStayUp(
  rest: Track[],
  timeoutMs: number,
  look: (t: Track) => Promise<void>,
  completes: ReadonlySet<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const watched = (async () => {
    for (;;) {
      await sleep(nextLook(rest, completes));
      await Promise.all(rest.map(look));
      if (rest.every((t) => t.phase === 'ready')) return;
      if (Date.now() >= deadline)
        throw new StackUnhealthy(
          `service '${rest.find((t) => t.phase !== 'ready')?.svc.name}' did not stay up`,
        );
    }
  })();
  watched.catch(() => {}); // the caller awaits it; an unobserved rejection must not end the process
  return watched;
}

/**
 * How long until the next look: a service without a check is ready once it has stayed up one
 * probe interval, so its look is due at that moment, not a whole interval after the previous look
 * (which came one inspect after its start); anything else is looked at every interval.
 */
function nextLook(tracks: Iterable<Track>, completes: ReadonlySet<string>): number {
  let wait = PROBE_EVERY_MS;
  for (const t of tracks) {
    if (t.phase !== 'started' || probeCommand(t.svc.health) || completes.has(t.svc.name)) continue;
    // Past it (a container that is not running yet, say): the interval as before, never a spin.
    const due = t.startedAt + t.stayUpMs - Date.now();
    if (due > 0) wait = Math.min(wait, due);
  }
  return wait;
}

/** One look at a started service: its state from the engine, then one active check if due. */
async function observe(
  engine: DockerEngine,
  t: Track,
  completes: ReadonlySet<string>,
  fail: (t: Track, why: string) => Promise<never>,
  ready: (t: Track) => void,
): Promise<void> {
  let info: Awaited<ReturnType<DockerEngine['inspect']>>;
  try {
    info = await engine.docker.getContainer(t.container.id).inspect();
  } catch (err) {
    return fail(t, `cannot be inspected: ${dockerMessage(err)}`);
  }
  const st = info.State;
  if (st.Status === 'exited' || st.Status === 'dead') {
    const why = exitFailure(t.svc.name, st, completes);
    if (why) return fail(t, why);
    t.completed = true;
    return ready(t);
  }
  t.running = st.Status === 'running' && !st.Paused;
  if (t.phase === 'ready') return;
  if (st.Paused) return ready(t);
  if (st.Status !== 'running') return;
  const cmd = probeCommand(t.svc.health);
  if (st.Health?.Status === 'healthy') return ready(t);
  if (!cmd) {
    // A one-shot is ready only when it has exited 0; running is not enough for its dependants.
    // Anything else without a check must stay up one probe interval, so a command that fails at
    // once is reported as an exit rather than passing as started.
    if (completes.has(t.svc.name)) return;
    if (Date.now() - t.startedAt >= t.stayUpMs) return ready(t);
    // svc's keeper once its loop runs cannot end on its own (keeper.ts): looked at once, as it starts.
    if (t.keeperLooks) {
      const looks = t.keeperLooks;
      t.keeperLooks = 0;
      if (await provenKeeper(st.Pid, looks)) return ready(t);
    }
    return;
  }
  if (st.Health?.Status === 'unhealthy' && st.Health.FailingStreak > 0)
    return fail(t, `is unhealthy after ${st.Health.FailingStreak} failed checks (Docker's own healthcheck)`);
  if (t.probing) return;
  t.probing = true;
  const outcome = await probeOnce(engine, t.container.id, t.svc).finally(() => {
    t.probing = false;
  });
  t.lastOutput = outcome.output;
  if (outcome.ok) {
    t.failingSince = 0;
    return ready(t);
  }
  const now = Date.now();
  const startPeriod = durationMs(t.svc.health?.start_period);
  if (now - t.startedAt < startPeriod) return; // failures in the start period do not count
  t.failingSince ||= now;
  if (now - t.failingSince >= allowedFailureMs(t.svc.health))
    return fail(
      t,
      `is unhealthy: its health check kept failing for ${Math.round((now - t.failingSince) / 1000)}s after its start period`,
    );
}
