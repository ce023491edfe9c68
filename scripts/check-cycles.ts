/**
 * No run-time import cycles between the project's modules: a cycle makes what a module sees at
 * load time depend on which module was imported first. Run by `npm run lint`; exits 1 naming every
 * cycle as the chain of files that closes it (import-graph.ts reads the import lines).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { type Cycle, cycles, resolveFrom, runtimeImports } from './import-graph.ts';

const root = join(import.meta.dirname, '..');
const scanned = [
  'programs',
  'server',
  'sidecar',
  'cli',
  'protocol',
  'shared',
  'console/src',
  'clients/typescript',
  'release',
  'scripts',
  'test',
  'bench',
];

function* files(dir: string): Generator<string> {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* files(path);
    else if (/\.tsx?$/.test(entry.name)) yield path;
  }
}

const graph = new Map<string, string[]>();
for (const top of scanned) {
  for (const path of files(join(root, top))) {
    const rel = relative(root, path);
    graph.set(
      rel,
      runtimeImports(readFileSync(path, 'utf8')).map((spec) => resolveFrom(rel, spec)),
    );
  }
}
const found = cycles(graph);
function describe(c: Cycle): string {
  const others = c.members.filter((m) => !c.path.includes(m));
  const more = others.length > 0 ? ` (the same cycle also runs through ${others.join(', ')})` : '';
  return `import cycle: ${c.path.join(' -> ')}${more}`;
}
if (found.length > 0) {
  process.stderr.write(
    `${found.map(describe).join('\n')}\n\n` +
      `check-cycles: ${found.length} import cycle(s); move what both sides need into a module of its own.\n`,
  );
  process.exit(1);
}
process.stdout.write(`check-cycles: ${graph.size} modules, no import cycles\n`);
