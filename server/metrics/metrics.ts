// Prometheus metrics of one control plane, in a registry of its own (several servers
// may share a test process): HTTP request latency by route, command latency by kind, deployment
// phase durations by kind, and sidecar hosts connected. Exposed by routes.ts at GET /metrics.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import {
  type CommandFinished,
  commandFinished,
  type PhaseFinished,
  type PoolClaim,
  type PoolState,
  phaseFinished,
  poolClaim,
  poolState,
} from './channels.ts';

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const PHASE_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 300, 600];

export interface MetricsSources {
  /** Sidecar streams open now. */
  hostsConnected(): number;
  /** Throws that escaped a callback or reached the process, by kind, since the start. */
  faults(): ReadonlyMap<string, number>;
  /** What crossed between this replica and the others (server/cluster/cluster.ts `traffic`). */
  replicas?(): { messages: ReadonlyMap<string, number>; hostsHere: number; hostsElsewhere: number };
}

export class Metrics {
  readonly registry = new Registry();
  readonly http: Histogram<'method' | 'route' | 'status'>;
  readonly commands: Histogram<'kind' | 'outcome'>;
  readonly phases: Histogram<'kind' | 'phase' | 'status'>;
  readonly commandsFailed: Counter<'kind'>;
  readonly #onPhase = (m: unknown) => {
    const p = m as PhaseFinished;
    this.phases.observe({ kind: p.kind, phase: p.phase, status: p.status }, p.ms / 1000);
  };
  readonly poolSize: Gauge<'version' | 'state'>;
  readonly poolClaims: Counter<'from'>;
  readonly #onPoolState = (m: unknown) => {
    this.poolSize.reset();
    for (const p of (m as PoolState).pools) {
      this.poolSize.set({ version: p.version, state: 'target' }, p.size);
      this.poolSize.set({ version: p.version, state: 'ready' }, p.ready);
      this.poolSize.set({ version: p.version, state: 'starting' }, p.starting);
    }
  };
  readonly #onPoolClaim = (m: unknown) =>
    this.poolClaims.inc({ from: (m as PoolClaim).warm ? 'pool' : 'fork' });
  readonly #onCommand = (m: unknown) => {
    const c = m as CommandFinished;
    this.commands.observe({ kind: c.kind, outcome: c.ok ? 'ok' : 'error' }, c.ms / 1000);
    if (!c.ok) this.commandsFailed.inc({ kind: c.kind });
  };

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'svc_process_' });
    const histogram = <L extends string>(name: string, help: string, labelNames: L[], buckets: number[]) =>
      new Histogram<L>({ name, help, labelNames, buckets, registers });
    this.http = histogram(
      'svc_http_request_duration_seconds',
      'HTTP requests by method, route template and status code',
      ['method', 'route', 'status'],
      LATENCY_BUCKETS,
    );
    this.commands = histogram(
      'svc_command_duration_seconds',
      'Host commands from record to result, by command kind and outcome',
      ['kind', 'outcome'],
      LATENCY_BUCKETS,
    );
    this.commandsFailed = new Counter({
      name: 'svc_commands_failed_total',
      help: 'Host commands that failed or timed out, by kind',
      labelNames: ['kind'],
      registers,
    });
    this.phases = histogram(
      'svc_deployment_phase_duration_seconds',
      'Deployment phases by deployment kind, phase and final status',
      ['kind', 'phase', 'status'],
      PHASE_BUCKETS,
    );
    new Gauge({
      name: 'svc_hosts_connected',
      help: 'Sidecar hosts with an open stream',
      registers,
      collect() {
        this.set(sources.hostsConnected());
      },
    });
    new Counter({
      name: 'svc_uncaught_errors_total',
      help: 'Throws no caller could take (callback: caught by a guard; uncaughtException, unhandledRejection: by the process), by kind',
      labelNames: ['kind'],
      registers,
      collect() {
        this.reset();
        for (const [kind, n] of sources.faults()) this.inc({ kind }, n);
      },
    });
    const { replicas } = sources;
    if (replicas) {
      new Counter({
        name: 'svc_replica_messages_total',
        help: 'Notifications between control-plane replicas, by direction (sent, received) and kind (cmd: a command for a host held elsewhere; done, miss: its answer; out, tail: relayed process output; up, down: host locations; evt, key)',
        labelNames: ['direction', 'kind'],
        registers,
        collect() {
          this.reset();
          for (const [key, n] of replicas().messages) {
            const [direction, kind] = key.split(':');
            this.inc({ direction, kind }, n);
          }
        },
      });
      new Gauge({
        name: 'svc_replica_hosts',
        help: 'Hosts by where their stream is: here, or on another live replica (whose commands this one relays)',
        labelNames: ['stream'],
        registers,
        collect() {
          const t = replicas();
          this.set({ stream: 'here' }, t.hostsHere);
          this.set({ stream: 'elsewhere' }, t.hostsElsewhere);
        },
      });
    }
    this.poolSize = new Gauge({
      name: 'svc_pool_members',
      help: 'Warm pools by version: target size, ready members, members still forking',
      labelNames: ['version', 'state'],
      registers,
    });
    this.poolClaims = new Counter({
      name: 'svc_pool_claims_total',
      help: 'Sandboxes from a version: handed out by its warm pool or forked on demand',
      labelNames: ['from'],
      registers,
    });
    phaseFinished.subscribe(this.#onPhase);
    commandFinished.subscribe(this.#onCommand);
    poolState.subscribe(this.#onPoolState);
    poolClaim.subscribe(this.#onPoolClaim);
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.metrics(), contentType: this.registry.contentType };
  }

  close(): void {
    phaseFinished.unsubscribe(this.#onPhase);
    commandFinished.unsubscribe(this.#onCommand);
    poolState.unsubscribe(this.#onPoolState);
    poolClaim.unsubscribe(this.#onPoolClaim);
  }
}
