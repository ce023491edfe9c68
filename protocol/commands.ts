// Command kinds sent over the host stream, with their payloads and results (spec: "Command kinds").
import type { CapabilitiesType, ResultTypes } from './results.ts';
import type { Egress, ServiceRecord, VerifierSpec } from './spec.ts';

export const COMMAND_KINDS = [
  'host.report',
  'env.create',
  'env.snapshot',
  'env.fork',
  'env.rollback',
  'env.exec',
  'env.put',
  'env.get',
  'verify.collect',
  'verify.run',
  'env.destroy',
  // Warm pools (issue 15): members wait paused, costing no CPU, and are thawed when claimed.
  'env.pause',
  'env.unpause',
] as const;
/** In the protocol but never sent; sidecars answer them with `unknown command kind`. */
export const RESERVED_KINDS = ['egress.set', 'clock.set', 'ingress.set'] as const;

export type CommandKind = (typeof COMMAND_KINDS)[number];

export const UNKNOWN_KIND_ERROR = 'unknown command kind';
export const DEFAULT_EXEC_TIMEOUT_SEC = 120;
export const MAX_ARCHIVE_BYTES = 32 * 1024 * 1024;

/** A one-time HTTP location on the control plane for archive bytes. */
export interface BlobRef {
  url: string;
  token: string;
}

/** What a host reports of itself (schema: `CapabilitiesSchema` in results.ts). */
export type Capabilities = CapabilitiesType;

export interface Payloads {
  'host.report': Record<string, never>;
  'env.create': {
    version: string;
    services: ServiceRecord[];
    volumes: string[];
    from_snapshot: string;
    warm: string[] | null;
    egress: Egress;
    /** The project context, fetched once from `blob` into the context dataset unless already there. */
    context?: { sha256: string; blob: BlobRef };
    /** The agent service (`x-svc.agent.service`): the sidecar refuses to run it as uid 0. */
    agent?: string;
    /** Disk limit across the volumes in MiB (`x-svc.disk_mb`). */
    disk_mb?: number;
  };
  'env.snapshot': { name: string; keep_paused?: string[] };
  'env.fork': {
    from_env: string;
    from_snapshot: string;
    services: ServiceRecord[];
    volumes: string[];
    egress: Egress;
    agent?: string;
    disk_mb?: number;
  };
  'env.rollback': { snapshot: string };
  'env.exec': { service: string; cmd: string[]; timeout_sec?: number };
  /**
   * Archives that do not fit in a frame come by `blob` (tar_b64 is then empty): the sidecar
   * GETs `url` with `Authorization: Bearer <token>` (one time, 10 minutes).
   */
  'env.put': { service: string; path: string; tar_b64: string; blob?: BlobRef };
  /** With `upload`, an archive too large for a frame is PUT there instead of returned inline. */
  'env.get': { service: string; path: string; upload?: BlobRef };
  /** `resume`: unpause the agent again when the submission is refused (no snapshot follows). */
  'verify.collect': { id: string; agent_service: string; collect: string[]; resume?: boolean };
  'verify.run': { id: string; verifier: VerifierSpec; refused: boolean };
  'env.destroy': Record<string, never>;
  'env.pause': Record<string, never>;
  'env.unpause': Record<string, never>;
}

/** Each command's result, derived from its schema in results.ts (`RESULT_SCHEMAS`). */
export type Results = ResultTypes;
