// The long-lived parts that talk to hosts and run deployments: the stream hub, the command
// dispatcher, the host records, the blob store for large archives and the deployment engine, wired
// once here. The hub only emits what happens on host streams (hello, frame, gone); the dispatcher
// and the host records subscribe to it, and the late-result cleanup to the dispatcher. Nothing is
// handed to anything after it was built.
import type { Server } from 'node:http';
import type { Cluster, ClusterHosts } from './cluster/cluster.ts';
import { CommandRelay } from './cluster/relay.ts';
import type { Config } from './config/config.ts';
import type { Db } from './db/types.ts';
import type { EngineLogger, OrchestratorDeps, Provisioner } from './deployments/deps.ts';
import { DeploymentEngine } from './deployments/engine.ts';
import { KINDS } from './deployments/kinds/index.ts';
import { lateResult } from './deployments/late-results.ts';
import { gvisorTeamsPolicy } from './envs/runtime-policy.ts';
import type { LiveEvents } from './events/store.ts';
import { Blobs } from './hosts/blobs.ts';
import { failUnfinishedCommands } from './hosts/command-store.ts';
import { CommandTargets } from './hosts/command-target.ts';
import { Dispatcher, type Driver } from './hosts/dispatcher.ts';
import { HostRecords } from './hosts/host-records.ts';
import { Hub, type HubLogger, type JoinTokenConsumer, type UpgradeHandler } from './hosts/hub.ts';
import { ATTACH_TIMEOUT_MS, ProcessStreams } from './processes/streams.ts';
import { archivePath } from './uploads/uploads.ts';

export const JOIN_WAIT_MS = 6 * 60_000;

export interface OrchestratorOptions {
  consumeJoinToken: JoinTokenConsumer;
  /** Records which host a join token made. */
  onJoined?: (token: string, hostId: string) => Promise<void>;
  mintJoinToken: (teamId: string, cloudId: string) => Promise<string>;
  ensureDriverHosts: (teamId: string) => Promise<void>;
  provisioners?: Map<string, Provisioner>;
  drivers?: Map<string, Driver>;
  /** Where committed events go live (the context's EventBus); without it, streams poll for them. */
  events?: LiveEvents;
  /** Where the other control-plane replicas reach this one (blobs parked here are relayed to it). */
  replicaUrl?: () => string;
  /** The replicas sharing the database: where hosts are, and how commands reach the others'. */
  cluster?: Cluster;
  /** This process's replica id (the owner of the deployments it runs); generated when absent. */
  replica?: string;
}

export interface Orchestrator {
  hub: Hub;
  /** Which hosts are connected here or on another replica, and waits for one to be. */
  hosts: ClusterHosts;
  /** Commands and process output to and from other replicas (absent with one replica). */
  relay: CommandRelay | undefined;
  dispatcher: Dispatcher;
  targets: CommandTargets;
  engine: DeploymentEngine;
  blobs: Blobs;
  processes: ProcessStreams;
  /**
   * Ends what a previous process left running, then accepts host streams on `server`; other
   * WebSocket upgrades go to `upgrades` (404 without it).
   */
  start(server: Server, upgrades?: UpgradeHandler): Promise<{ recovered: number; failedCommands: number }>;
  close(): Promise<void>;
}

export function createOrchestrator(
  db: Db,
  config: Config,
  log: HubLogger & EngineLogger,
  opts: OrchestratorOptions,
): Orchestrator {
  const hub = new Hub(db, opts.consumeJoinToken, log, opts.onJoined);
  const cluster = opts.cluster;
  const relay = cluster?.shared ? new CommandRelay(db, cluster, hub, log) : undefined;
  const dispatcher = new Dispatcher(
    db,
    opts.drivers,
    log,
    undefined,
    opts.events,
    cluster && { replica: cluster.id, remote: relay },
  );
  const records = new HostRecords(
    db,
    dispatcher,
    log,
    opts.events,
    cluster && ((id) => cluster.hostGone(id, () => hub.isConnected(id))),
  );
  // Where each host's stream is, for every replica, before anything is sent on it: a known host's
  // is written with its hello.
  if (cluster) {
    hub.locateWith(
      (h) => cluster.admit(h),
      (id) => void cluster.unlocate(id, () => hub.isConnected(id)).catch(() => {}),
    );
    hub.on('hello', (h) => cluster.hostConnected(h));
  }
  // The dispatcher first: a host's stream is known to it before host.report is sent on it, and
  // its commands in flight fail before the host is marked unreachable.
  for (const subscriber of [dispatcher, records]) {
    hub.on('hello', (h) => subscriber.connected(h));
    hub.on('frame', (f) => subscriber.received(f));
    hub.on('gone', (g) => subscriber.gone(g));
  }
  const processes = new ProcessStreams(dispatcher, log);
  hub.on('output', (o) => processes.output(o) || relay?.output(o));
  if (relay && cluster) hub.on('hello', (h) => relay.moved(h.hostId, cluster.id));
  hub.on('gone', (g) => processes.gone(g));
  relay?.on('output', (o) => processes.output(o));
  relay?.on('tail', (t) => processes.relayedTo(t));
  // A follower whose replica died: the host here stops sending its output (bounded either way).
  relay?.on('orphan', (o) =>
    dispatcher
      .run(o.target, o.envId, 'proc.detach', { follow: o.follow }, ATTACH_TIMEOUT_MS)
      .catch((err) => log.warn({ host: o.target.hostId, err: (err as Error).message }, 'detach failed')),
  );
  cluster?.on('down', (g) => processes.gone(g));
  const hosts: ClusterHosts = cluster ? cluster.hosts(hub) : hub;
  // Blob bytes live in this process: their URLs lead to this replica (SVC_REPLICA_URL), not the
  // load balancer; a host's request that reaches another replica anyway is relayed here.
  const blobs = new Blobs(
    db,
    () => config.replicaUrl || config.publicUrl,
    opts.replicaUrl ?? (() => config.replicaUrl),
  );
  const targets = new CommandTargets(db, hosts);
  const deps: OrchestratorDeps = {
    db,
    log,
    events: opts.events,
    dispatcher,
    hub: hosts,
    targets,
    provisioners: opts.provisioners ?? new Map(),
    mintJoinToken: opts.mintJoinToken,
    ensureDriverHosts: opts.ensureDriverHosts,
    get publicUrl() {
      return config.publicUrl;
    },
    get sidecarUrl() {
      return config.sidecarUrl;
    },
    joinWaitMs: JOIN_WAIT_MS,
    requiredRuntime: gvisorTeamsPolicy(db, config.gvisorTeams),
    offerContext: (upload) => blobs.offerFile(archivePath(config.uploadsDir, upload)),
  };
  dispatcher.on('late', ({ hostId, frame }) =>
    lateResult(deps, hostId, frame).catch((err) =>
      log.warn({ host: hostId, err: (err as Error).message }, 'cleaning up after a late result failed'),
    ),
  );
  const engine = new DeploymentEngine(deps, KINDS, {
    replica: opts.replica,
    leaseMs: config.deployLeaseMs,
  });
  return {
    hub,
    hosts,
    relay,
    dispatcher,
    targets,
    engine,
    blobs,
    processes,
    async start(server, upgrades) {
      // Commands other live replicas wait for are theirs to finish.
      const failedCommands = await failUnfinishedCommands(
        db,
        'control plane restarted before the result arrived',
        cluster ? [...cluster.replica.live] : [],
      );
      hub.attach(server, upgrades);
      const recovered = await engine.recover();
      return { recovered, failedCommands };
    },
    async close() {
      engine.close();
      processes.closeAll('the control plane is shutting down; attach again to resume');
      await hub.close();
    },
  };
}
