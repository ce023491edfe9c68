// "Changes nothing": the row count of every table, compared before and after hostile input.
import type { TestServer } from '../../support/server.ts';

export async function rowCounts(s: TestServer): Promise<Record<string, number>> {
  const db = s.server.ctx.db;
  const tables =
    db.dialect.name === 'sqlite'
      ? await db.all<{ name: string }>(
          "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        )
      : await db.all<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'",
        );
  const out: Record<string, number> = {};
  for (const { name } of tables.sort((a, b) => a.name.localeCompare(b.name))) {
    if (!/^[a-z_0-9]+$/.test(name)) continue;
    const r = await db.get<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${name}`);
    out[name] = Number(r?.n ?? 0);
  }
  return out;
}
