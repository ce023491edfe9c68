// .dockerignore patterns match as @balena/dockerignore's regular expressions do, without their
// backtracking: a tenant's pattern cannot hold svcd's event loop while it packs a build context.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import dockerignoreModule from '@balena/dockerignore';
import { compileIgnore } from './dockerignore.ts';

const library = dockerignoreModule as unknown as (o?: { ignorecase?: boolean }) => {
  add(p: string[]): { ignores(path: string): boolean };
};

/** A fixed pseudo-random sequence, so a failure names the same case on every run. */
function lcg(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

describe('.dockerignore patterns', () => {
  it('leave out exactly what the library leaves out, for patterns of globs, classes and escapes', () => {
    const rand = lcg(7);
    const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
    const pieces = ['a', 'b', 'c', '/', '*', '**', '**/', '?', '.', '[ab]', '[^a]', '[a-b]', '\\a', 'ab'];
    const names = ['a', 'b', 'c', 'ab', 'ba', '.a', 'abc', 'a.b', 'cc'];
    let compared = 0;
    for (let i = 0; i < 400; i++) {
      const pattern = Array.from({ length: 1 + Math.floor(rand() * 6) }, () => pick(pieces)).join('');
      const negated = rand() < 0.2 ? [`!${pick(names)}`] : [];
      const lines = [pattern, ...negated];
      const ours = compileIgnore(lines.join('\n'));
      const theirs = library({ ignorecase: false }).add(lines);
      for (let j = 0; j < 25; j++) {
        const path = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => pick(names)).join('/');
        assert.equal(
          ours(path, false),
          theirs.ignores(path),
          `pattern ${JSON.stringify(lines)}, path ${path}`,
        );
        compared++;
      }
    }
    assert.equal(compared, 10_000);
  });

  // Before, each of these backtracked for hours on a path of a few dozen characters.
  it('a pattern that backtracks as a regular expression is matched in one pass', { timeout: 120_000 }, () => {
    const long = 'a'.repeat(4000);
    assert.equal(compileIgnore('(a+)+b')(long, false), false);
    assert.equal(compileIgnore(`${'**/'.repeat(40)}x`)(`${'a/'.repeat(2000)}y`, false), false);
    assert.equal(compileIgnore(`${'*a'.repeat(40)}b`)(long, false), false);
    assert.equal(compileIgnore(`${'*'.repeat(100_000)}b`)(long, false), false);
    // As Docker reads them: regular-expression syntax is just characters.
    assert.equal(compileIgnore('(a+)+b')('(a+)+b', false), true);
    assert.equal(compileIgnore(`${'**/'.repeat(40)}x`)(`${'a/'.repeat(2000)}x`, false), true);
  });
});
