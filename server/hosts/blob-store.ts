// The one-time blob tokens every replica can check (blobs.ts): the token's sha256 hash, which way
// the bytes go, and the replica that holds them.
import type { Queryable } from '../db/types.ts';

export interface BlobTokenRow {
  token_hash: string;
  direction: string;
  holder_url: string;
  expires_at: string;
}

export async function insertBlobToken(
  q: Queryable,
  id: string,
  r: { tokenHash: string; direction: string; holderUrl: string; expiresAt: string },
): Promise<void> {
  await q.run(
    'INSERT INTO blob_tokens (id, token_hash, direction, holder_url, expires_at) VALUES (?, ?, ?, ?, ?)',
    [id, r.tokenHash, r.direction, r.holderUrl, r.expiresAt],
  );
}

export async function blobToken(q: Queryable, id: string): Promise<BlobTokenRow | undefined> {
  return q.get('SELECT token_hash, direction, holder_url, expires_at FROM blob_tokens WHERE id = ?', [id]);
}

export async function deleteBlobToken(q: Queryable, id: string): Promise<void> {
  await q.run('DELETE FROM blob_tokens WHERE id = ?', [id]);
}
