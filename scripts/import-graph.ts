/**
 * The run-time import graph read from import lines, without TypeScript: what check-cycles.ts needs
 * to keep import cycles out. `import type` and `export type` are erased by type stripping and are
 * no edge; `import { type A } from` still loads its module at run time (verbatimModuleSyntax), so
 * it is one. Only relative specifiers are followed; dynamic `import()` runs later and is no edge.
 */
import { dirname, join } from 'node:path';

/** A static import or re-export: its whole statement up to the specifier, bounded in length. */
const STATIC = /^[ \t]*(import|export)\b([^'";]{0,2000}?)['"](\.{1,2}\/[^'"\n]{1,500})['"]/gm;

/** The relative modules `text` loads when it is evaluated (specifiers as written). */
export function runtimeImports(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(STATIC)) {
    const [, keyword, middle, spec] = m;
    if (/^\s+type\s/.test(middle)) continue; // import type / export type: erased
    // `export` without `from` (export const x = './y') is no import; a bare `import './x'` is.
    if (keyword === 'export' && !/\sfrom\s*$/.test(middle)) continue;
    if (keyword === 'import' && middle.trim() !== '' && !/\sfrom\s*$/.test(middle)) continue;
    out.push(spec);
  }
  return out;
}

/** `spec` as imported from `file`, as a path relative to the same root. */
export const resolveFrom = (file: string, spec: string): string => join(dirname(file), spec);

export interface Cycle {
  /** One way round: starts and ends at the same module. */
  path: string[];
  /** Every module of the strongly connected component the path is in, sorted. */
  members: string[];
}

/**
 * Each strongly connected component of more than one module (or a module importing itself) once,
 * with one cycle through it.
 */
export function cycles(graph: Map<string, string[]>): Cycle[] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: Cycle[] = [];
  // Tarjan's algorithm, iterative so a deep graph cannot overflow the stack.
  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    const work: { node: string; next: number }[] = [{ node: start, next: 0 }];
    index.set(start, counter);
    low.set(start, counter++);
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const top = work[work.length - 1];
      const edges = graph.get(top.node) ?? [];
      if (top.next < edges.length) {
        const to = edges[top.next++];
        if (!graph.has(to)) continue;
        if (!index.has(to)) {
          index.set(to, counter);
          low.set(to, counter++);
          stack.push(to);
          onStack.add(to);
          work.push({ node: to, next: 0 });
        } else if (onStack.has(to)) low.set(top.node, Math.min(low.get(top.node)!, index.get(to)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) !== index.get(top.node)) continue;
      const component: string[] = [];
      let n: string;
      do {
        n = stack.pop() as string;
        onStack.delete(n);
        component.push(n);
      } while (n !== top.node);
      const selfLoop = component.length === 1 && edges.includes(top.node);
      if (component.length > 1 || selfLoop)
        found.push({ path: pathThrough(graph, new Set(component)), members: component.sort() });
    }
  }
  return found;
}

/** One cycle inside a strongly connected component: a shortest way back to its first module. */
function pathThrough(graph: Map<string, string[]>, members: Set<string>): string[] {
  const first = [...members].sort()[0];
  const from = new Map<string, string>();
  const queue = [first];
  for (let i = 0; i < queue.length; i++) {
    for (const to of graph.get(queue[i]) ?? []) {
      if (!members.has(to)) continue;
      if (to === first) {
        const path = [first];
        for (let n = queue[i]; n !== first; n = from.get(n) as string) path.push(n);
        return [first, ...path.slice(1).reverse(), first];
      }
      if (!from.has(to)) {
        from.set(to, queue[i]);
        queue.push(to);
      }
    }
  }
  return [first, first];
}
