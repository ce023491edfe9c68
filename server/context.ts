// What every route module receives: the parsed config, the database and the long-lived domain
// services. Built once in main.ts; tests build it the same way against their own database.
import type { Facts } from '../shared/facts.ts';
import type { Faults } from '../shared/faults.ts';
import type { SecretBox } from './clouds/secret-box.ts';
import type { Cluster } from './cluster/cluster.ts';
import type { OAuthStates } from './codehost/oauth.ts';
import type { WebhookIntake } from './codehost/webhook-intake.ts';
import type { Config } from './config/config.ts';
import type { Db } from './db/types.ts';
import type { DeploymentEngine } from './deployments/engine.ts';
import type { EventBus } from './events/bus.ts';
import type { Blobs } from './hosts/blobs.ts';
import type { CommandTargets } from './hosts/command-target.ts';
import type { HostConnectivity } from './hosts/connectivity.ts';
import type { Dispatcher } from './hosts/dispatcher.ts';
import type { Lifecycle } from './http/readiness.ts';
import type { Authenticator } from './identity/auth.ts';
import type { WarmPool } from './pool/pool.ts';
import type { ProcessStreams } from './processes/streams.ts';

export interface AppContext {
  config: Config;
  /** Where this process is in its lifecycle (starting → serving → stopping → stopped): /ready reads it. */
  lifecycle: { state(): Lifecycle };
  db: Db;
  /** This process as one replica of those sharing the database (its id, lease, notifications). */
  cluster: Cluster;
  auth: Authenticator;
  hub: HostConnectivity;
  dispatcher: Dispatcher;
  /** Whether a host can take a command now, its never-changing facts kept (command-target.ts). */
  targets: CommandTargets;
  engine: DeploymentEngine;
  blobs: Blobs;
  /** Live events: committed appends fanned out to the open event streams. */
  events: EventBus;
  /** Seals and opens provider tokens (AES-GCM at rest). */
  secrets: SecretBox;
  /**
   * Service names by version id for the exec hot path: a version's spec never changes, so they
   * are read once and are right on every replica.
   */
  versionServices: Facts<string[]>;
  /** Console sign-ins waiting for the code host's redirect (in the database: any replica finishes one). */
  oauthStates: OAuthStates;
  /** Bounds the webhook bodies read at once (per process, so per replica). */
  webhookIntake: WebhookIntake;
  /** Warm pools of forks (started and stopped by its routes). */
  pool: WarmPool;
  /** Throws no caller could take (guarded callbacks, the process-level handlers): logged, counted. */
  faults: Faults;
  /** Clients following live processes (output frames from the hub to them). */
  processes: ProcessStreams;
}
