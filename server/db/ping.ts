// Whether the database answers: what a replica's readiness depends on.
import type { Queryable } from './types.ts';

export async function ping(db: Queryable): Promise<void> {
  await db.get('SELECT 1 AS one');
}
