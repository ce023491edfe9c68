// The control plane for the benchmark's second mode: the same startServer the svc-server program
// runs (same config parsing, same default logger), plus an IPC hook that drives the dispatcher
// directly at a fixed rate. That measures the hub's own round trip (command row, stream write,
// sidecar, ack, result, row update) without HTTP, auth or the environment lookups in front of it.
//   node bench/hub/hub-server.ts <svc-server flags>   (started by bench/hub/run.ts with an IPC channel)
import { parseConfig } from '../../server/config/config.ts';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { startServer } from '../../server/main.ts';
import { type LoadFigures, openLoop } from './measure.ts';
import { flushTimes } from './probe.ts';

export interface HubLoad {
  op: 'load';
  rate: number;
  seconds: number;
  warmupSeconds: number;
  teamId: string;
  /** Where commands go: one environment per host, round robin. */
  targets: { hostId: string; envId: string }[];
}

export type FromHubServer =
  | { op: 'ready'; url: string }
  | { op: 'measuring' }
  | { op: 'loaded'; figures: LoadFigures };

const COMMAND_TIMEOUT_MS = 30_000;

const server = await startServer(parseConfig(process.argv.slice(2)), { limits: NO_RATE_LIMITS });
const dispatcher = server.orchestrator.dispatcher;
const hub = server.orchestrator.hub;

// The sweep calls the public flush(); timing it shows what the heartbeat writes cost per sweep.
const flush = hub.flush.bind(hub);
hub.flush = async () => {
  const t0 = performance.now();
  await flush();
  if (!flushTimes.on) return;
  const ms = performance.now() - t0;
  flushTimes.count++;
  flushTimes.totalMs += ms;
  flushTimes.maxMs = Math.max(flushTimes.maxMs, ms);
};

async function load(m: HubLoad): Promise<LoadFigures> {
  const fire = (i: number) => {
    const t = m.targets[i % m.targets.length];
    return dispatcher
      .run(
        { hostId: t.hostId, teamId: m.teamId, kind: 'sidecar' },
        t.envId,
        'env.exec',
        { service: 'main', cmd: ['true'], timeout_sec: 20 },
        COMMAND_TIMEOUT_MS,
      )
      .then(() => undefined);
  };
  if (m.warmupSeconds > 0) await openLoop(m.rate, m.warmupSeconds, fire);
  process.send?.({ op: 'measuring' } satisfies FromHubServer);
  return openLoop(m.rate, m.seconds, fire);
}

process.on('message', async (m: HubLoad) => {
  if (m.op === 'load') process.send?.({ op: 'loaded', figures: await load(m) } satisfies FromHubServer);
});
const stop = async () => {
  await server.close();
  process.exit(0);
};
process.once('SIGTERM', () => void stop());
process.once('SIGINT', () => void stop());
// The benchmark died without stopping us: do not outlive it.
process.on('disconnect', () => void stop());
process.send?.({ op: 'ready', url: server.url } satisfies FromHubServer);
