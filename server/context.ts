// What every route module receives: the parsed config, the database and the long-lived domain
// services. Built once in main.ts; tests build it the same way against their own database.
import type { Faults } from '../shared/faults.ts';
import type { SecretBox } from './clouds/secret-box.ts';
import type { Config } from './config/config.ts';
import type { Db } from './db/types.ts';
import type { DeploymentEngine } from './deployments/engine.ts';
import type { EventBus } from './events/bus.ts';
import type { Blobs } from './hosts/blobs.ts';
import type { HostConnectivity } from './hosts/connectivity.ts';
import type { Dispatcher } from './hosts/dispatcher.ts';
import type { Authenticator } from './identity/auth.ts';

export interface AppContext {
  config: Config;
  db: Db;
  auth: Authenticator;
  hub: HostConnectivity;
  dispatcher: Dispatcher;
  engine: DeploymentEngine;
  blobs: Blobs;
  /** Live events: committed appends fanned out to the open event streams. */
  events: EventBus;
  /** Seals and opens provider tokens (AES-GCM at rest). */
  secrets: SecretBox;
  /** Throws no caller could take (guarded callbacks, the process-level handlers): logged, counted. */
  faults: Faults;
}
