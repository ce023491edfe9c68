// What deployment kinds may use. Kept as an interface so orchestrator tests can run the real
// engine with a fake sidecar, and so provisioning and drivers plug in without the engine knowing.
import type { BlobRef } from '../../protocol/commands.ts';
import type { Runtime } from '../../protocol/spec.ts';
import type { Db } from '../db/types.ts';
import type { LiveEvents } from '../events/store.ts';
import type { CommandTargets } from '../hosts/command-target.ts';
import type { Dispatcher } from '../hosts/dispatcher.ts';

export interface CloudRecord {
  ID: string;
  TeamID: string;
  Provider: string;
  Name: string;
  Config: Record<string, unknown>;
}

/** Creates machines in a VM cloud; each installs the sidecar and joins with the given token. */
export interface Provisioner {
  provision(
    cloud: CloudRecord,
    req: { joinToken: string; serverUrl: string; sidecarUrl: string; name: string },
  ): Promise<{ ref: string; ip: string; name: string }>;
}

/** Where the engine reports failures it cannot record on a deployment (a pino logger in production). */
export interface EngineLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface OrchestratorDeps {
  db: Db;
  log: EngineLogger;
  /** Where appended events go live once committed (absent in tests that build pieces alone). */
  events?: LiveEvents;
  dispatcher: Dispatcher;
  hub: {
    isConnected(hostId: string): boolean;
    waitForHost(teamId: string, cloudId: string, timeoutMs: number): Promise<string>;
    waitConnected(hostId: string, timeoutMs: number): Promise<boolean>;
  };
  /** Whether a host can take a command now (the context's, with its kept host facts). */
  targets: CommandTargets;
  /** Providers that can create machines, by provider name (e.g. `cloudvm`). */
  provisioners: Map<string, Provisioner>;
  /** Mints a join token for a cloud's provisioned machine. */
  mintJoinToken(teamId: string, cloudId: string): Promise<string>;
  /** Makes sure every hosted-provider cloud of the team has its driver host. */
  ensureDriverHosts(teamId: string): Promise<void>;
  publicUrl: string;
  sidecarUrl: string;
  /** How long the deploy `join` phase waits for a provisioned host (spec: 6 minutes). */
  joinWaitMs: number;
  /** The runtime a team must run environments under (SVC_GVISOR_TEAMS); absent = no policy. */
  requiredRuntime?(teamId: string): Promise<Runtime | null>;
  /** A one-time URL for an uploaded project context (PUT /v1/uploads), for env.create. */
  offerContext?(upload: string): Promise<BlobRef>;
}
