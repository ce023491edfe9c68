/**
 * Stores own their SQL (docs/architecture.md): SQL text may appear only in store modules
 * (`store.ts`, `*-store.ts`, a context's `store/` folder), in `server/db/` (the query layer and the
 * migrations) and in tests. Run by `npm run lint`; exits 1 naming every file:line that breaks it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { allowed, findSql } from './sql-rule.ts';

const root = join(import.meta.dirname, '..');
const scanned = ['server', 'sidecar', 'cli', 'protocol', 'programs'];

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else if (entry.name.endsWith('.ts')) yield path;
  }
}

const problems: string[] = [];
for (const top of scanned) {
  for (const path of files(join(root, top))) {
    const rel = relative(root, path);
    if (allowed(rel)) continue;
    for (const line of findSql(readFileSync(path, 'utf8'))) {
      problems.push(
        `${rel}:${line}: SQL outside a store; move the query into its bounded context's store.ts`,
      );
    }
  }
}
if (problems.length > 0) {
  process.stderr.write(
    `${problems.join('\n')}\n\ncheck-sql: ${problems.length} place(s) write SQL outside store modules ` +
      '(store.ts, *-store.ts, a store/ folder) and server/db/.\n',
  );
  process.exit(1);
}
process.stdout.write('check-sql: SQL only in stores and server/db/\n');
