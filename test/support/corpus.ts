// Where the shared corpus is: `shared/corpus` beside the repository root (CI clones main with shared/
// beside it), or beside the main checkout when this is a git worktree elsewhere.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

function find(): string {
  const candidates = [join(ROOT, '..', 'shared', 'corpus')];
  try {
    const common = execFileSync(
      'git',
      ['-C', ROOT, 'rev-parse', '--path-format=absolute', '--git-common-dir'],
      {
        encoding: 'utf8',
      },
    ).trim();
    candidates.push(join(dirname(common), '..', 'shared', 'corpus'));
  } catch {
    // not a git checkout: only the first place
  }
  const found = candidates.find((c) => existsSync(c));
  if (!found) throw new Error(`the shared corpus is missing: looked in ${candidates.join(', ')}`);
  return found;
}

/** The shared corpus folder (compose files, provider specs, tasks, webhooks). */
export const CORPUS_DIR = find();

export const corpusPath = (...parts: string[]): string => join(CORPUS_DIR, ...parts);
