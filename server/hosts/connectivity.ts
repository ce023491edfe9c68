// What the rest of the server may ask the hub about sidecar streams (hub.ts implements it): reads
// that need only this depend on this, not on the hub and its transport.

/** The hub's live view of sidecar streams. */
export interface HostConnectivity {
  /** True while a sidecar host has an open stream. Driver hosts are answered by their kind, not here. */
  isConnected(hostId: string): boolean;
  /** How many sidecar hosts have an open stream now. */
  connectedCount?(): number;
}
