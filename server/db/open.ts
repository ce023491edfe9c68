import { type MigrationContext, migrate, type StepResult } from './migrate.ts';
import { PostgresDb } from './postgres.ts';
import { MIGRATIONS } from './schema.ts';
import { SqliteDb } from './sqlite.ts';
import type { Db } from './types.ts';

export function isPostgresDsn(target: string): boolean {
  return /^postgres(ql)?:\/\//i.test(target);
}

/**
 * Opens the database named by `-db` (a file path or a postgres:// DSN) without migrating it;
 * `poolSize`: the most connections to Postgres at once.
 */
export function connect(target: string, poolSize?: number): Db {
  return isPostgresDsn(target) ? new PostgresDb(target, poolSize) : new SqliteDb(target);
}

export class MigrationError extends Error {
  readonly steps: StepResult[];
  constructor(steps: StepResult[]) {
    const bad = steps.find((s) => s.status === 'failed');
    super(`database migration ${bad?.version} (${bad?.name}) failed: ${bad?.error}`);
    this.steps = steps;
  }
}

/** Opens and migrates; the schema is created and migrated on every start. */
export async function openDb(
  target: string,
  ctx: MigrationContext = {},
  poolSize?: number,
): Promise<{ db: Db; steps: StepResult[] }> {
  const db = connect(target, poolSize);
  try {
    const steps = await migrate(db, MIGRATIONS, ctx);
    if (steps.some((s) => s.status === 'failed')) throw new MigrationError(steps);
    return { db, steps };
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
}
