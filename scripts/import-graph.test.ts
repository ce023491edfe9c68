import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cycles, resolveFrom, runtimeImports } from './import-graph.ts';

describe('the run-time import graph', () => {
  test('imports and re-exports that load a module at run time are edges; type-only ones are not', () => {
    const text = [
      "import { a } from './a.ts';",
      "import type { B } from './b.ts';",
      "import { type C } from './c.ts';",
      'import {',
      '  d,',
      '  type D,',
      "} from '../d.ts';",
      "import './e.ts';",
      "export { f } from './f.ts';",
      "export type { G } from './g.ts';",
      "export * from './h.ts';",
      "import pg from 'pg';",
      "const later = () => import('./i.ts');",
      "export const path = './j.ts';",
    ].join('\n');
    assert.deepEqual(runtimeImports(text), ['./a.ts', './c.ts', '../d.ts', './e.ts', './f.ts', './h.ts']);
  });

  test('a specifier resolves against the importing file', () => {
    assert.equal(resolveFrom('cli/commands/x.ts', '../harbor.ts'), 'cli/harbor.ts');
  });

  test('a cycle is found once with its way round; a graph without one has none', () => {
    const graph = new Map([
      ['cli/harbor.ts', ['cli/harbor-steps.ts', 'cli/terminal-bench.ts', 'cli/errors.ts']],
      ['cli/harbor-steps.ts', ['cli/harbor.ts']],
      ['cli/terminal-bench.ts', ['cli/harbor.ts']],
      ['cli/errors.ts', []],
      ['cli/self.ts', ['cli/self.ts']],
    ]);
    assert.deepEqual(cycles(graph), [
      {
        path: ['cli/harbor-steps.ts', 'cli/harbor.ts', 'cli/harbor-steps.ts'],
        members: ['cli/harbor-steps.ts', 'cli/harbor.ts', 'cli/terminal-bench.ts'],
      },
      { path: ['cli/self.ts', 'cli/self.ts'], members: ['cli/self.ts'] },
    ]);
    graph.set('cli/harbor-steps.ts', []);
    graph.set('cli/terminal-bench.ts', []);
    graph.set('cli/self.ts', []);
    assert.deepEqual(cycles(graph), []);
  });
});
