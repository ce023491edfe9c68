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
}

/** Drops rows created before `before` (expired and past the key hold). */
export async function dropDeviceCodesBefore(q: Queryable, before: string): Promise<void> {
  await q.run('DELETE FROM device_codes WHERE created_at < ?', [before]);
}

export async function insertDeviceCode(
  q: Queryable,
  r: { codeHash: string; userCodeHash: string; createdAt: string; expiresAt: string },
): Promise<void> {
  await q.run(
    `INSERT INTO device_codes (code_hash, user_code_hash, status, created_at, expires_at)
     VALUES (?, ?, 'pending', ?, ?)`,
    [r.codeHash, r.userCodeHash, r.createdAt, r.expiresAt],
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
  teamId: string,
  keyId: string,
): Promise<boolean> {
  const r = await q.run(
    "UPDATE device_codes SET status = 'approved', team_id = ?, key_id = ? WHERE code_hash = ? AND status = 'pending'",
    [teamId, keyId, codeHash],
  );
  return r.changes > 0;
}

export async function markDeviceCodeDelivered(q: Queryable, codeHash: string): Promise<void> {
  await q.run("UPDATE device_codes SET status = 'delivered' WHERE code_hash = ?", [codeHash]);
}
