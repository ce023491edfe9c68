// Hosts: sidecar machines (joined with a token, reached over their stream) and driver hosts
// (one per hosted-provider cloud, run in-process). `connected` is not stored: it is the hub's
// live view for sidecars and always true for drivers.

import type { Static } from '@sinclair/typebox';
import type { Host as HostSchema, HostStatus } from '../../protocol/api/records.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { type Db, json, now, parseJson, type Queryable, updateColumns } from '../db/types.ts';
import { sameHash } from '../identity/secrets.ts';

/** Host `Status`: the API's union (protocol/api/records.ts). */
export type { HostStatus };

/**
 * A host as the API answers it (protocol/api/records.ts) but for `connected`, which is the hub's
 * live view, and with `Kind`: `sidecar` or `driver:<provider>` (not a spec field of Host; Target
 * shows it as `kind`).
 */
export type Host = Omit<Static<typeof HostSchema>, 'connected'> & { Kind: string };

export interface HostRow {
  id: string;
  team_id: string;
  cloud_id: string;
  name: string;
  status: string;
  provider_ref: string;
  secret_hash: string;
  last_seen_at: string | null;
  created_at: string;
  capabilities: string;
  kind: string;
}

export const hostOf = (r: HostRow): Host => ({
  ID: r.id,
  TeamID: r.team_id,
  CloudID: r.cloud_id,
  Name: r.name,
  Status: r.status as HostStatus,
  ProviderRef: r.provider_ref,
  LastSeenAt: r.last_seen_at,
  CreatedAt: r.created_at,
  Capabilities: parseJson(r.capabilities, {}),
  Kind: r.kind,
});

export interface NewHost {
  teamId: string;
  cloudId?: string;
  name: string;
  status: HostStatus;
  providerRef?: string;
  secretHash?: string;
  capabilities?: Record<string, unknown>;
  kind?: string;
  lastSeenAt?: string;
}

export async function insertHost(q: Queryable, h: NewHost): Promise<Host> {
  const row: HostRow = {
    id: newId(PREFIX.host),
    team_id: h.teamId,
    cloud_id: h.cloudId ?? '',
    name: h.name,
    status: h.status,
    provider_ref: h.providerRef ?? '',
    secret_hash: h.secretHash ?? '',
    last_seen_at: h.lastSeenAt ?? null,
    created_at: now(),
    capabilities: json(h.capabilities ?? {}),
    kind: h.kind ?? 'sidecar',
  };
  await q.run(
    `INSERT INTO hosts (id, team_id, cloud_id, name, status, provider_ref, secret_hash, last_seen_at, created_at,
      capabilities, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.team_id,
      row.cloud_id,
      row.name,
      row.status,
      row.provider_ref,
      row.secret_hash,
      row.last_seen_at,
      row.created_at,
      row.capabilities,
      row.kind,
    ],
  );
  return hostOf(row);
}

export async function getHostRow(q: Queryable, id: string): Promise<HostRow | undefined> {
  return q.get<HostRow>('SELECT * FROM hosts WHERE id = ?', [id]);
}

/** Sidecars first, then driver hosts; oldest first within each. */
export async function listHosts(q: Queryable, teamId: string): Promise<Host[]> {
  const rows = await q.all<HostRow>(
    "SELECT * FROM hosts WHERE team_id = ? ORDER BY (kind = 'sidecar') DESC, created_at, id",
    [teamId],
  );
  return rows.map(hostOf);
}

export async function findDriverHost(q: Queryable, cloudId: string): Promise<Host | undefined> {
  const r = await q.get<HostRow>("SELECT * FROM hosts WHERE cloud_id = ? AND kind <> 'sidecar'", [cloudId]);
  return r && hostOf(r);
}

export interface HostPatch {
  status?: HostStatus;
  lastSeenAt?: string;
  capabilities?: Record<string, unknown>;
  secretHash?: string;
  name?: string;
}

export async function updateHost(q: Queryable, id: string, p: HostPatch): Promise<void> {
  await updateColumns(
    q,
    'hosts',
    {
      status: p.status,
      last_seen_at: p.lastSeenAt,
      capabilities: p.capabilities === undefined ? undefined : json(p.capabilities),
      secret_hash: p.secretHash,
      name: p.name,
    },
    'id = ?',
    [id],
  );
}

/**
 * Inserts a driver host under a fixed id unless that id exists (two callers racing to create the
 * same cloud's driver host both succeed, and one row results). True when this call inserted it.
 */
export async function insertDriverHost(
  q: Queryable,
  id: string,
  h: { teamId: string; cloudId: string; name: string; kind: string; capabilities: Record<string, unknown> },
): Promise<boolean> {
  const r = await q.run(
    `INSERT INTO hosts (id, team_id, cloud_id, name, status, kind, capabilities, created_at)
     VALUES (?, ?, ?, ?, 'connected', ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    [id, h.teamId, h.cloudId, h.name, h.kind, json(h.capabilities), now()],
  );
  return r.changes > 0;
}

/** A known host's hello: its id, the hash of the secret it sent, and what to record. */
export interface KnownHello {
  id: string;
  secretHash: string;
  at: string;
  /** As the hello sent them; absent: the recorded ones stay. */
  capabilities?: Record<string, unknown>;
  /** The replica whose stream it is: the host's location is written with the hello. */
  replicaId?: string;
}

export interface KnownHost {
  teamId: string;
  cloudId: string;
  /** The capabilities recorded before this hello (JSON text). */
  recorded: string;
}

/** Checks and records a known host's hello (connectKnownHost, or the cluster's in its turn). */
export type AdmitKnown = (h: KnownHello) => Promise<KnownHost | undefined>;

const KNOWN = `id = ? AND kind = 'sidecar' AND secret_hash = ?`;
const LOCATION_UPDATE = `ON CONFLICT (host_id) DO UPDATE SET replica_id = excluded.replica_id,
  team_id = excluded.team_id, cloud_id = excluded.cloud_id, since = excluded.since`;

/**
 * A known host says hello: when the secret's hash is the host's, the host is connected, seen now,
 * has the hello's capabilities and (with `replicaId`) its stream's location, and its team, cloud
 * and previously recorded capabilities are returned; otherwise nothing changes and this returns
 * undefined. The hash is a SHA-256 of a random secret, matched as the other secrets' hashes are
 * (api_keys, join_tokens), and compared once more in constant time here.
 */
export async function connectKnownHost(db: Db, h: KnownHello): Promise<KnownHost | undefined> {
  return (await connectKnownHosts(db, [h], h.replicaId)).get(h.id);
}

/**
 * connectKnownHost for several hellos (distinct hosts) at once, by host id. Where a WITH clause
 * may write, that is one statement for all of them (a replica's pool takes every host of a dead
 * replica at once, and each round trip waits in it); elsewhere three per host.
 */
export async function connectKnownHosts(
  db: Db,
  hellos: readonly KnownHello[],
  replicaId?: string,
): Promise<Map<string, KnownHost>> {
  const caps = (h: KnownHello) => (h.capabilities === undefined ? null : json(h.capabilities));
  const rows: (HostRow & { recorded: string })[] = [];
  if (hellos.length === 0) return new Map();
  if (db.dialect.capabilities.writesInWith) {
    const located = replicaId
      ? `, l AS (INSERT INTO host_locations (host_id, replica_id, team_id, cloud_id, since)
           SELECT id, ?, team_id, cloud_id, at FROM u ${LOCATION_UPDATE})`
      : '';
    // Every part of a WITH sees the rows as they were before the statement: `o` has the
    // capabilities recorded until now. Rows are found by primary key.
    rows.push(
      ...(await db.all<HostRow & { recorded: string }>(
        `WITH v (id, hash, caps, at) AS (VALUES ${hellos.map(() => '(?, ?, ?, ?)').join(', ')}),
         o AS (SELECT hosts.id, hosts.capabilities FROM hosts JOIN v ON hosts.id = v.id),
         u AS (
           UPDATE hosts SET status = 'connected', last_seen_at = v.at, capabilities = COALESCE(v.caps, hosts.capabilities)
             FROM v WHERE hosts.id = v.id AND hosts.kind = 'sidecar' AND hosts.secret_hash = v.hash
           RETURNING hosts.id, hosts.team_id, hosts.cloud_id, hosts.secret_hash, v.at)
         ${located}
         SELECT u.id, u.team_id, u.cloud_id, u.secret_hash, o.capabilities AS recorded FROM u JOIN o ON o.id = u.id`,
        [...hellos.flatMap((h) => [h.id, h.secretHash, caps(h), h.at]), ...(replicaId ? [replicaId] : [])],
      )),
    );
  } else {
    for (const h of hellos) {
      const old = await db.get<HostRow>(`SELECT * FROM hosts WHERE ${KNOWN}`, [h.id, h.secretHash]);
      if (!old || !sameHash(old.secret_hash, h.secretHash)) continue;
      rows.push({ ...old, recorded: old.capabilities });
      await db.run(
        `UPDATE hosts SET status = 'connected', last_seen_at = ?, capabilities = COALESCE(?, capabilities)
          WHERE id = ?`,
        [h.at, caps(h), h.id],
      );
      if (replicaId)
        await db.run(
          `INSERT INTO host_locations (host_id, replica_id, team_id, cloud_id, since) VALUES (?, ?, ?, ?, ?)
           ${LOCATION_UPDATE}`,
          [h.id, replicaId, old.team_id, old.cloud_id, h.at],
        );
    }
  }
  const hashes = new Map(hellos.map((h) => [h.id, h.secretHash]));
  const known = new Map<string, KnownHost>();
  for (const r of rows)
    if (sameHash(r.secret_hash, hashes.get(r.id) ?? ''))
      known.set(r.id, { teamId: r.team_id, cloudId: r.cloud_id, recorded: r.recorded });
  return known;
}

const FLUSH_CHUNK = 1000;
/** SQLite runs in the event loop: a flush of 5,000 rows in one go stalled every request ~30 ms. */
const SQLITE_FLUSH_CHUNK = 250;

/**
 * Heartbeat times of many hosts at once: one UPDATE … FROM (VALUES …) per chunk, each host keeping
 * its own time (a statement per host cost seconds at 10,000 hosts on Postgres, and on SQLite twice
 * the CPU of this: bench/hub/db-writes.ts). SQLite is synchronous, so it yields to I/O between
 * its smaller chunks. Both dialects name a VALUES list's columns column1, column2. Each host is
 * listed once (the hub's map of heartbeats seen).
 */
export async function setLastSeen(db: Db, seen: [id: string, at: string][]): Promise<void> {
  const yields = db.dialect.capabilities.blocksEventLoop;
  const size = yields ? SQLITE_FLUSH_CHUNK : FLUSH_CHUNK;
  for (let i = 0; i < seen.length; i += size) {
    const chunk = seen.slice(i, i + size);
    if (yields && i > 0) await new Promise((r) => setImmediate(r));
    await db.run(
      `UPDATE hosts SET last_seen_at = v.column2 FROM (VALUES ${chunk.map(() => '(?, ?)').join(', ')}) AS v
       WHERE hosts.id = v.column1`,
      chunk.flat(),
    );
  }
}
