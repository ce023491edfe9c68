// Command kinds sent over the host stream, with their payloads and results (spec: "Command kinds").
import type { BlobRefType, PayloadTypes } from './payloads.ts';
import { PROCESS_KINDS } from './processes.ts';
import type { CapabilitiesType, ResultTypes } from './results.ts';

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
  // Warm pools: members wait paused, costing no CPU, and are thawed when claimed.
  'env.pause',
  'env.unpause',
  // Single-file operations in a service's container (protocol/fs.ts).
  'fs.stat',
  'fs.list',
  'fs.mkdir',
  'fs.move',
  'fs.remove',
  'fs.read',
  'fs.write',
  'fs.watch',
  // Live processes (protocol/processes.ts): output streams back in binary frames while they run.
  ...PROCESS_KINDS,
] as const;
/** In the protocol but never sent; sidecars answer them with `unknown command kind`. */
export const RESERVED_KINDS = ['egress.set', 'clock.set', 'ingress.set'] as const;

export type CommandKind = (typeof COMMAND_KINDS)[number];

/**
 * Kinds that run at once, beside whatever else the environment is doing (a keystroke must not wait
 * for a two-minute exec), and whose results are not kept by the sidecar: they act on live state
 * that a sidecar restart loses anyway, so a resent one has nothing to be answered from.
 */
export const LIVE_KINDS: ReadonlySet<string> = new Set<CommandKind>(PROCESS_KINDS);

export const UNKNOWN_KIND_ERROR = 'unknown command kind';
export { DEFAULT_EXEC_TIMEOUT_SEC } from './payloads.ts';
export const MAX_ARCHIVE_BYTES = 32 * 1024 * 1024;

/** A one-time HTTP location on the control plane for archive bytes. */
export type BlobRef = BlobRefType;

/** What a host reports of itself (schema: `CapabilitiesSchema` in results.ts). */
export type Capabilities = CapabilitiesType;

/** Each command's payload, derived from its schema in payloads.ts (`PAYLOAD_SCHEMAS`). */
export type Payloads = PayloadTypes;

/** Each command's result, derived from its schema in results.ts (`RESULT_SCHEMAS`). */
export type Results = ResultTypes;
