// Replicas and where each sidecar host's stream is held. A replica's lease (lease_until) is on the
// database's clock (Dialect.clockMs), so replicas on machines whose clocks differ agree on it; a
// host's location lasts as long as its replica's lease (one write per heartbeat, not one per host).
import { type Db, now, updateColumns } from '../db/types.ts';

export interface ReplicaRow {
  id: string;
  hostname: string;
  pid: number;
  url: string;
  started_at: string;
  lease_until: number;
}

export interface HostLocation {
  host_id: string;
  replica_id: string;
  team_id: string;
  cloud_id: string;
}

export async function insertReplica(
  db: Db,
  r: { id: string; hostname: string; pid: number; leaseMs: number },
): Promise<void> {
  await db.run(
    `INSERT INTO replicas (id, hostname, pid, url, started_at, lease_until)
     VALUES (?, ?, ?, '', ?, ${db.dialect.clockMs} + ?)`,
    [r.id, r.hostname, r.pid, now(), r.leaseMs],
  );
}

/** Renews the lease; false when the row is gone (another replica found this one dead). */
export async function renewReplica(db: Db, id: string, leaseMs: number): Promise<boolean> {
  const r = await db.run(`UPDATE replicas SET lease_until = ${db.dialect.clockMs} + ? WHERE id = ?`, [
    leaseMs,
    id,
  ]);
  return r.changes > 0;
}

export async function setReplicaUrl(db: Db, id: string, url: string): Promise<void> {
  await updateColumns(db, 'replicas', { url }, 'id = ?', [id]);
}

/** Every replica row with whether its lease holds now. */
export async function replicas(db: Db): Promise<(ReplicaRow & { live: boolean })[]> {
  const rows = await db.all<ReplicaRow & { live: number | boolean }>(
    `SELECT id, hostname, pid, url, started_at, lease_until,
            CASE WHEN lease_until > ${db.dialect.clockMs} THEN 1 ELSE 0 END AS live
       FROM replicas ORDER BY started_at`,
  );
  return rows.map((r) => ({
    ...r,
    pid: Number(r.pid),
    lease_until: Number(r.lease_until),
    live: Number(r.live) === 1,
  }));
}

/**
 * A replica found dead (its lease lapsed, or a clean stop): the hosts it held are unreachable unless
 * another replica holds them now, their locations and its row go. Returns the hosts it held.
 */
export async function removeReplica(db: Db, id: string): Promise<string[]> {
  return db.transaction(async (tx) => {
    const held = await tx.all<{ host_id: string }>(
      'SELECT host_id FROM host_locations WHERE replica_id = ?',
      [id],
    );
    await tx.run(
      `UPDATE hosts SET status = 'unreachable'
        WHERE id IN (SELECT host_id FROM host_locations WHERE replica_id = ?)`,
      [id],
    );
    await tx.run('DELETE FROM host_locations WHERE replica_id = ?', [id]);
    await tx.run('DELETE FROM replicas WHERE id = ?', [id]);
    return held.map((h) => h.host_id);
  });
}

/** This replica holds the host's stream now (a newer stream elsewhere moves it again). */
export async function putLocation(db: Db, l: HostLocation): Promise<void> {
  await db.run(
    `INSERT INTO host_locations (host_id, replica_id, team_id, cloud_id, since) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (host_id) DO UPDATE SET replica_id = excluded.replica_id, team_id = excluded.team_id,
       cloud_id = excluded.cloud_id, since = excluded.since`,
    [l.host_id, l.replica_id, l.team_id, l.cloud_id, now()],
  );
  // Another replica that lost the stream may have marked it unreachable just before.
  await db.run(`UPDATE hosts SET status = 'connected' WHERE id = ? AND status <> 'connected'`, [l.host_id]);
}

/**
 * The host's stream on this replica ended: the location goes if it is still this replica's, and the
 * host is unreachable unless another replica holds it. False when another replica holds it now.
 */
export async function releaseLocation(db: Db, hostId: string, replicaId: string): Promise<boolean> {
  const r = await db.run('DELETE FROM host_locations WHERE host_id = ? AND replica_id = ?', [
    hostId,
    replicaId,
  ]);
  await db.run(
    `UPDATE hosts SET status = 'unreachable'
      WHERE id = ? AND NOT EXISTS (SELECT 1 FROM host_locations WHERE host_id = ?)`,
    [hostId, hostId],
  );
  return r.changes > 0;
}

/** Hosts held by live replicas other than `self`. */
export async function remoteLocations(db: Db, self: string): Promise<HostLocation[]> {
  return db.all<HostLocation>(
    `SELECT l.host_id, l.replica_id, l.team_id, l.cloud_id FROM host_locations l
       JOIN replicas r ON r.id = l.replica_id
      WHERE l.replica_id <> ? AND r.lease_until > ${db.dialect.clockMs}`,
    [self],
  );
}

/** The live replica holding the host's stream, if any. */
export async function holderOf(db: Db, hostId: string): Promise<string | undefined> {
  const row = await db.get<{ replica_id: string }>(
    `SELECT l.replica_id FROM host_locations l JOIN replicas r ON r.id = l.replica_id
      WHERE l.host_id = ? AND r.lease_until > ${db.dialect.clockMs}`,
    [hostId],
  );
  return row?.replica_id;
}
