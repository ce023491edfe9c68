// What a build or project context leaves out: `.dockerignore` as Docker reads it (shared by the
// CLI, which ships the context, and the sidecar, which streams build contexts to the engine).
// A CommonJS module whose export is the factory itself: its default import, in Node and in the
// single-executable bundles alike (a createRequire(import.meta.url) is empty in a CommonJS bundle).
import dockerignoreModule from '@balena/dockerignore';
import { globTest } from './glob.ts';

interface Rule {
  pattern: string;
  regexp?: { test(path: string): boolean };
}

interface Ignore {
  add(patterns: string[]): Ignore;
  ignores(path: string): boolean;
  /** The library's own pattern → RegExp step (every match goes through it). */
  _compile(rule: Rule): Rule;
}

const dockerignore = dockerignoreModule as unknown as (opts?: { ignorecase?: boolean }) => Ignore;

export type IgnoreTest = (path: string, isDir: boolean) => boolean;

/** Compiles .dockerignore text; the test says whether a context-relative path is left out. */
export function compileIgnore(text: string): IgnoreTest {
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const patterns = lines.filter((l) => l !== '' && !l.startsWith('#'));
  if (patterns.length === 0) return () => false;
  const ig = dockerignore({ ignorecase: false });
  // The library's cleaning of patterns, its `!` exceptions and parent directories stay; only
  // its regular expressions, which backtrack on a tenant's pattern, are replaced (glob.ts).
  ig._compile = (rule) => {
    rule.regexp ??= { test: globTest(rule.pattern) };
    return rule;
  };
  ig.add(patterns);
  // A directory left out is still walked when an exception (!pattern) could bring a file back.
  const hasExceptions = patterns.some((p) => p.startsWith('!'));
  return (path, isDir) => ig.ignores(path) && !(isDir && hasExceptions);
}
