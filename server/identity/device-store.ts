// The device flow's rows (spec "Sign-in, teams and keys"): codes stored only as hashes.
import type { Queryable } from '../db/types.ts';

export type DeviceStatus = 'pending' | 'approved' | 'delivered';

export interface DeviceRow {
  code_hash: string;
  user_code_hash: string;
  status: DeviceStatus;
  team_id: string | null;
  key_id: string | null;
  created_at: string;
  expires_at: string;
  /** The public key the approved key is sealed to (device-seal.ts); '' on rows from before it. */
  seal_pub: string;
  /** The approved key, sealed to seal_pub, until handed out; then ''. */
  sealed_key: string;
  /** Until when the sealed key may be handed out. */
  held_until: string;
}

/** Drops rows created before `before` (expired and past the key hold). */
export async function dropDeviceCodesBefore(q: Queryable, before: string): Promise<void> {
  await q.run('DELETE FROM device_codes WHERE created_at < ?', [before]);
}

export async function insertDeviceCode(
  q: Queryable,
  r: { codeHash: string; userCodeHash: string; createdAt: string; expiresAt: string; sealPub: string },
): Promise<void> {
  await q.run(
    `INSERT INTO device_codes (code_hash, user_code_hash, status, created_at, expires_at, seal_pub)
     VALUES (?, ?, 'pending', ?, ?, ?)`,
    [r.codeHash, r.userCodeHash, r.createdAt, r.expiresAt, r.sealPub],
  );
}

export async function deviceCodeByUserCode(
  q: Queryable,
  userCodeHash: string,
): Promise<DeviceRow | undefined> {
  return q.get<DeviceRow>('SELECT * FROM device_codes WHERE user_code_hash = ?', [userCodeHash]);
}

export async function deviceCodeByHash(q: Queryable, codeHash: string): Promise<DeviceRow | undefined> {
  return q.get<DeviceRow>('SELECT * FROM device_codes WHERE code_hash = ?', [codeHash]);
}

/** Pending → approved with the minted key; false when another approval got there first. */
export async function approveDeviceCode(
  q: Queryable,
  codeHash: string,
  a: { teamId: string; keyId: string; sealedKey: string; heldUntil: string },
): Promise<boolean> {
  const r = await q.run(
    `UPDATE device_codes SET status = 'approved', team_id = ?, key_id = ?, sealed_key = ?, held_until = ?
     WHERE code_hash = ? AND status = 'pending'`,
    [a.teamId, a.keyId, a.sealedKey, a.heldUntil, codeHash],
  );
  return r.changes > 0;
}

/**
 * Approved → delivered, the sealed key forgotten; true for the one caller that made the change
 * (of two polls racing on two replicas, one gets the key).
 */
export async function markDeviceCodeDelivered(q: Queryable, codeHash: string): Promise<boolean> {
  const r = await q.run(
    "UPDATE device_codes SET status = 'delivered', sealed_key = '' WHERE code_hash = ? AND status = 'approved'",
    [codeHash],
  );
  return r.changes > 0;
}
