// Project contexts for parser tests: one from a list of files, or a stub that answers for any path
// (a name with a dot or named Dockerfile is a file, anything else a directory), standing in for a
// corpus project whose files are not in the corpus.
import { type ContextEntry, emptyContext, type ProjectContext } from './context.ts';

/** A context holding exactly these files (and their parent directories); values are file text. */
export function contextOf(files: Record<string, string>, links: Record<string, string> = {}): ProjectContext {
  const ctx = emptyContext('f'.repeat(64));
  const addDirs = (path: string) => {
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++)
      ctx.entries.set(parts.slice(0, i).join('/'), { kind: 'dir', size: 0 });
  };
  for (const [path, text] of Object.entries(files)) {
    addDirs(path);
    if (path.endsWith('/')) {
      ctx.entries.set(path.slice(0, -1), { kind: 'dir', size: 0 });
      continue;
    }
    ctx.entries.set(path, { kind: 'file', size: Buffer.byteLength(text) });
    ctx.files.set(path, text);
  }
  for (const [path, link] of Object.entries(links)) {
    addDirs(path);
    ctx.entries.set(path, { kind: 'symlink', size: 0, link });
  }
  return ctx;
}

class StubEntries extends Map<string, ContextEntry> {
  override get(path: string): ContextEntry | undefined {
    if (path === '.env') return undefined;
    const base = path.split('/').at(-1) ?? '';
    return /dockerfile/i.test(base) || base.includes('.')
      ? { kind: 'file', size: 0 }
      : { kind: 'dir', size: 0 };
  }
  override has(path: string): boolean {
    return this.get(path) !== undefined;
  }
}

/** A context in which every referenced path exists (files read as empty). */
export function stubContext(): ProjectContext {
  const ctx = emptyContext('0'.repeat(64));
  ctx.entries = new StubEntries();
  ctx.files = new (class extends Map<string, string> {
    override get(): string {
      return '';
    }
  })();
  return ctx;
}
