// What a build or project context leaves out: `.dockerignore` as Docker reads it (shared by the
// CLI, which ships the context, and the sidecar, which streams build contexts to the engine).
// A CommonJS module whose export is the factory itself: its default import, in Node and in the
// single-executable bundles alike (a createRequire(import.meta.url) is empty in a CommonJS bundle).
import dockerignoreModule from '@balena/dockerignore';

interface Ignore {
  add(patterns: string[]): Ignore;
  ignores(path: string): boolean;
}

const dockerignore = dockerignoreModule as unknown as (opts?: { ignorecase?: boolean }) => Ignore;

export type IgnoreTest = (path: string, isDir: boolean) => boolean;

/** Compiles .dockerignore text; the test says whether a context-relative path is left out. */
export function compileIgnore(text: string): IgnoreTest {
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const patterns = lines.filter((l) => l !== '' && !l.startsWith('#'));
  if (patterns.length === 0) return () => false;
  const ig = dockerignore({ ignorecase: false }).add(patterns);
  // A directory left out is still walked when an exception (!pattern) could bring a file back.
  const hasExceptions = patterns.some((p) => p.startsWith('!'));
  return (path, isDir) => ig.ignores(path) && !(isDir && hasExceptions);
}
