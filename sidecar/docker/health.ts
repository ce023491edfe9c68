// Health of a stack, read from the Engine API so both compose flavors wait the same way (v1 has no
// `up --wait`). A service is ready when its container runs and is healthy (or has no healthcheck),
// when it is paused (frozen on purpose), or when it exited 0 and a dependant waits for exactly
// that (`service_completed_successfully`). A container that exited otherwise, died or went
// unhealthy fails the wait at once with its exit code, last health output and last log lines.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { exitFailure, oneShots, PROBE_EVERY_MS, probeOnce } from './active-health.ts';
import type { DockerEngine, ServiceContainer } from './engine.ts';
import { dockerMessage, StackUnhealthy, tail } from './errors.ts';

type Verdict = { ready: true } | { ready: false; failed: boolean; why: string; id?: string };

interface Probe {
  service: string;
  verdict: Verdict;
}

/**
 * Containers healthy now (Docker's last check passed, or one check of our own passes now; no
 * healthcheck: running), each with the time it started. A snapshot takes it while it
 * checkpoints, just before its freeze (see `waitHealthy`'s `before`).
 */
export type HealthyBefore = Map<string, string>;

export async function healthyBefore(
  engine: DockerEngine,
  services: ServiceRecord[],
  listed?: ServiceContainer[],
): Promise<HealthyBefore> {
  const out: HealthyBefore = new Map();
  const running = (listed ?? (await engine.containers())).filter((c) => c.state === 'running');
  await Promise.all(
    services.map(async (svc) => {
      const c = running.find((x) => x.service === svc.name);
      if (!c) return;
      const st = (
        await engine.docker
          .getContainer(c.id)
          .inspect()
          .catch(() => null)
      )?.State;
      if (!st?.Running || st.Paused) return;
      // Healthy by Docker's own last check counts, as it does in every wait (`check`); else one
      // check of ours.
      if (!st.Health || st.Health.Status === 'healthy' || (await probeOnce(engine, c.id, svc)).ok)
        out.set(c.id, st.StartedAt);
    }),
  );
  return out;
}

/** Which services of the stack a wait is not about, and what was healthy before a freeze. */
export interface WaitOptions {
  /** Left paused on purpose (a snapshot's `keep_paused`): not asked to be healthy. */
  skip?: readonly string[];
  before?: HealthyBefore;
}

async function check(engine: DockerEngine, stack: ServiceRecord[], opts: WaitOptions = {}): Promise<Probe[]> {
  const containers = await engine.containers();
  const completed = oneShots(stack);
  const before = opts.before;
  const waited = stack.filter((s) => !opts.skip?.includes(s.name));
  return Promise.all(
    waited.map(async (svc): Promise<Probe> => {
      const name = svc.name;
      const c = containers.find((x) => x.service === name);
      if (!c) return { service: name, verdict: { ready: false, failed: false, why: 'has no container yet' } };
      let info: Awaited<ReturnType<DockerEngine['inspect']>>;
      try {
        info = await engine.docker.getContainer(c.id).inspect();
      } catch (err) {
        return { service: name, verdict: { ready: false, failed: false, why: dockerMessage(err), id: c.id } };
      }
      const st = info.State;
      const health = st.Health;
      const lastCheck = health?.Log?.length ? tail(health.Log[health.Log.length - 1].Output ?? '', 5) : '';
      const checkNote = lastCheck ? `; last health check said: ${lastCheck}` : '';
      const no = (failed: boolean, why: string): Probe => ({
        service: name,
        verdict: { ready: false, failed, why: why + checkNote, id: c.id },
      });
      if (st.Paused) return { service: name, verdict: { ready: true } };
      if (st.Status === 'exited' || st.Status === 'dead') {
        const why = exitFailure(name, st, completed);
        return why ? no(true, why) : { service: name, verdict: { ready: true } };
      }
      if (st.Status !== 'running') return no(false, `is ${st.Status}`);
      if (!health || health.Status === 'healthy') return { service: name, verdict: { ready: true } };
      // Its check passed just before a freeze, it is the same process since (same start) and
      // no check of Docker's failed since: a freeze and thaw change nothing in a process, and
      // Docker's 'unhealthy' with no failed check is its pause mark (set when a pause stops its
      // checks), not a verdict. A fresh check of our own would cost another exec after the thaw.
      if (before?.get(c.id) === st.StartedAt && health.FailingStreak === 0)
        return { service: name, verdict: { ready: true } };
      // Docker marks a paused container unhealthy without a failed check; after the unpause it
      // turns healthy at the next check. Only failed checks make a service fail the wait.
      // Docker checks only every `interval` (and a check cut by a pause can leave a stale
      // 'unhealthy'): one passing check of our own is enough (active-health.ts).
      if ((await probeOnce(engine, c.id, svc)).ok) return { service: name, verdict: { ready: true } };
      if (health.Status === 'unhealthy' && health.FailingStreak > 0)
        return no(true, `is unhealthy after ${health.FailingStreak} failed checks`);
      return no(false, `is ${health.Status === 'starting' ? 'starting (health: starting)' : health.Status}`);
    }),
  );
}

async function describe(engine: DockerEngine, probes: Probe[]): Promise<string> {
  const parts: string[] = [];
  for (const p of probes) {
    if (p.verdict.ready) continue;
    let text = `service '${p.service}' ${p.verdict.why}`;
    if (p.verdict.id) {
      const logs = await engine.logTail(p.verdict.id, 20);
      text += logs ? `\nlast log lines of '${p.service}':\n${logs}` : `\n('${p.service}' printed nothing)`;
    }
    parts.push(text);
  }
  return parts.join('\n');
}

function quote(composeStderr: string): string {
  return composeStderr.trim() ? `\ncompose said: ${tail(composeStderr, 10)}` : '';
}

/**
 * Polls until every service of `stack` (the whole stack: one-shots are known by their dependants)
 * but `opts.skip` is ready. Throws StackUnhealthy as soon as one has failed, or when `timeoutMs` passes.
 */
export async function waitHealthy(
  engine: DockerEngine,
  stack: ServiceRecord[],
  timeoutMs: number,
  opts: WaitOptions = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probes = await check(engine, stack, opts);
    const failed = probes.filter((p) => !p.verdict.ready && p.verdict.failed);
    if (failed.length)
      throw new StackUnhealthy(`${engine.project} did not become healthy: ${await describe(engine, failed)}`);
    if (probes.every((p) => p.verdict.ready)) return;
    if (Date.now() >= deadline) {
      const secs = Math.round(timeoutMs / 1000);
      throw new StackUnhealthy(
        `${engine.project} not healthy after ${secs}s: ${await describe(engine, probes)}`,
      );
    }
    await sleep(Math.min(PROBE_EVERY_MS, Math.max(deadline - Date.now(), 10)));
  }
}

/**
 * After a failed `up`: a StackUnhealthy naming the services that failed or are not ready, with
 * what compose said; null when every service is ready (the failure was elsewhere).
 */
export async function diagnose(
  engine: DockerEngine,
  services: ServiceRecord[],
  composeStderr: string,
): Promise<StackUnhealthy | null> {
  const probes = await check(engine, services);
  const failed = probes.filter((p) => !p.verdict.ready && p.verdict.failed);
  const notReady = failed.length ? failed : probes.filter((p) => !p.verdict.ready);
  if (!notReady.length || notReady.every((p) => !p.verdict.ready && !p.verdict.id)) return null;
  return new StackUnhealthy(
    `${engine.project} did not become healthy: ${await describe(engine, notReady)}${quote(composeStderr)}`,
  );
}
