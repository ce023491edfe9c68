// Versioned, idempotent migrations run on every start. Like Kysely's migrator, it returns one
// result per step instead of throwing halfway, so the caller can report exactly what happened.
import type { Db, Dialect, Queryable } from './types.ts';

/** What a data step may need beyond SQL (e.g. the key that seals provider tokens). */
export interface MigrationContext {
  sealConfig?: (config: Record<string, unknown>) => Record<string, unknown>;
}

export interface Migration {
  version: number;
  name: string;
  up: (d: Dialect) => string[];
  /** Rewrites rows after `up`, in the same transaction. */
  data?: (tx: Queryable, ctx: MigrationContext) => Promise<void>;
}

export interface StepResult {
  version: number;
  name: string;
  status: 'applied' | 'already applied' | 'failed' | 'not run';
  error?: string;
}

export async function migrate(
  db: Db,
  migrations: readonly Migration[],
  ctx: MigrationContext = {},
): Promise<StepResult[]> {
  // Replicas starting together on one database: each step (and this first table) is applied by
  // whichever takes the lock first; the others find it applied once they hold it.
  const lock = db.dialect.setupLockSql;
  await db.transaction(async (tx) => {
    if (lock) await tx.run(lock);
    await tx.run(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
    );
  });
  const done = new Set(
    (await db.all<{ version: number }>('SELECT version FROM schema_migrations')).map((r) =>
      Number(r.version),
    ),
  );
  const results: StepResult[] = [];
  let failed = false;
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    if (failed) {
      results.push({ version: m.version, name: m.name, status: 'not run' });
      continue;
    }
    if (done.has(m.version)) {
      results.push({ version: m.version, name: m.name, status: 'already applied' });
      continue;
    }
    try {
      const applied = await db.transaction(async (tx) => {
        if (lock) {
          await tx.run(lock);
          if (await tx.get('SELECT version FROM schema_migrations WHERE version = ?', [m.version]))
            return false;
        }
        for (const stmt of m.up(db.dialect)) await tx.run(stmt);
        if (m.data) await m.data(tx, ctx);
        await tx.run('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
          m.version,
          m.name,
          new Date().toISOString(),
        ]);
        return true;
      });
      results.push({ version: m.version, name: m.name, status: applied ? 'applied' : 'already applied' });
    } catch (err) {
      failed = true;
      results.push({ version: m.version, name: m.name, status: 'failed', error: (err as Error).message });
    }
  }
  return results;
}
