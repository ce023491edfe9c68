// What the hub tells its subscribers about host streams (server/hosts/hub.ts). For one stream the
// order is always `hello`, then its `frame`s, then `gone`; when a host reconnects, `gone` of the old
// stream (replaced: true) comes before `hello` of the new one.
import type { Frame } from '../../protocol/frames.ts';
import type { HelloCapabilities } from '../../protocol/hello.ts';
import type { OutputFrame } from '../../protocol/processes.ts';

/** A host's stream was accepted: it is authenticated and its row says `connected`. */
export interface HostHello {
  hostId: string;
  teamId: string;
  cloudId: string;
  /** As sent in the hello (empty when a known host sent none). */
  capabilities: HelloCapabilities;
  /** They are the capabilities already recorded for the host (a known host saying the same again). */
  capabilitiesRecorded?: boolean;
  /** The stream's location (which replica holds it) was written with the hello. */
  located?: boolean;
  /** Writes a frame on this stream; false once it is closed or replaced. */
  send(f: Frame): boolean;
  /** True while this stream is the host's open stream. */
  current(): boolean;
}

/** A frame from an accepted stream, after the hub's limits (progress lines cut, events rate-limited). */
export interface HostFrame {
  hostId: string;
  teamId: string;
  frame: Frame;
}

/** A host's stream ended: closed, silent past the heartbeat grace, or replaced by a newer one. */
export interface HostGone {
  hostId: string;
  reason: string;
  /** The host is connected again on a newer stream (its `hello` follows). */
  replaced: boolean;
}

/** A process output frame (binary) from an accepted stream; `admitted` false: over the host's output budget. */
export interface HostOutput {
  hostId: string;
  frame: OutputFrame;
  admitted: boolean;
  /**
   * Relayed from another replica: the seq its previous frame for this follower ended at. Past
   * what the follower got, what came between was lost on the way (a gap for the client).
   */
  after?: number;
}

export type HubEvents = {
  hello: HostHello;
  frame: HostFrame;
  output: HostOutput;
  gone: HostGone;
};
