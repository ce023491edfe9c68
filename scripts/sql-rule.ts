// The rule `scripts/check-sql.ts` applies: which files may hold SQL text, and where SQL text is.
import { sep } from 'node:path';

/** Statement shapes, upper case as the code writes them (case-sensitive: prose says "select"). */
const SQL =
  /\bSELECT\s[^;`'"]*?\bFROM\s+\w|\bINSERT\s+INTO\s+\w|\bUPDATE\s+\w+\s+SET\s|\bDELETE\s+FROM\s+\w/g;

export function allowed(path: string): boolean {
  const p = path.split(sep).join('/');
  if (p.endsWith('.test.ts') || p.startsWith('test/')) return true;
  if (p.startsWith('server/db/')) return true;
  const name = p.slice(p.lastIndexOf('/') + 1);
  return name === 'store.ts' || name.endsWith('-store.ts') || /\/store\//.test(p);
}

export function findSql(text: string): number[] {
  const lines: number[] = [];
  for (const m of text.matchAll(SQL)) {
    const line = text.slice(0, m.index).split('\n').length;
    if (!lines.includes(line)) lines.push(line);
  }
  return lines;
}
