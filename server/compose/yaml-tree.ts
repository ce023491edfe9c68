// The parsed YAML document → plain values (Map for mappings, arrays, scalars), anchors, aliases and
// merge keys resolved in one pass in document order. This replaces the yaml package's toJS, whose
// alias handling is not bounded by the input: each alias scans every anchor and alias before it,
// and counting an anchor's aliases walks the whole document once per alias inside it (one anchor
// holding 2,000 aliases in a 95 kB file took 52 s). Here an alias costs one map lookup and shares
// the anchor's value, and merges copy keys against a budget, so the work is linear in the nodes
// written plus the budget. What an alias expands to is bounded later, by convert() in load.ts.
import { type Document, isAlias, isMap, isPair, isScalar, isSeq, type Node as YamlNode } from 'yaml';
import { fail } from './tree.ts';

/** Nesting of the document as written; convert() refuses anything past 64 with its path. */
const MAX_WRITTEN_DEPTH = 1000;

interface Anchored {
  value: unknown;
  /** False while the anchored node is still being built: an alias inside it is a cycle. */
  done: boolean;
}

export interface TreeLimits {
  /** Keys a merge may copy, in all, through every `<<`. */
  mergedKeys: number;
}

export function documentValue(doc: Document, limits: TreeLimits): unknown {
  const anchors = new Map<string, Anchored>();
  let copied = 0;

  const value = (node: unknown, depth: number): unknown => {
    if (depth > MAX_WRITTEN_DEPTH) fail(`the document is nested deeper than ${MAX_WRITTEN_DEPTH} levels`);
    if (node === null || node === undefined) return null;
    if (isAlias(node)) {
      const target = anchors.get(node.source);
      if (!target)
        fail(`invalid YAML: unresolved alias (the anchor must be set before the alias): ${cut(node.source)}`);
      if (!target.done) fail(`invalid YAML: alias *${cut(node.source)} is inside its own anchor`);
      return target.value;
    }
    const anchor = (node as YamlNode).anchor;
    // The most recent anchor of a name written before an alias is the one it means, so an anchor
    // counts from where its node starts (an inner anchor of the same name replaces it).
    const entry: Anchored | undefined = anchor ? { value: undefined, done: false } : undefined;
    if (anchor && entry) anchors.set(anchor, entry);
    const out = build(node, depth);
    if (entry) {
      entry.value = out;
      entry.done = true;
    }
    return out;
  };

  const build = (node: unknown, depth: number): unknown => {
    if (isScalar(node)) return node.value;
    if (isSeq(node)) {
      return node.items.map((item) =>
        isPair(item) ? pairsToMap([item], depth + 1) : value(item, depth + 1),
      );
    }
    if (isMap(node)) return pairsToMap(node.items, depth);
    return fail('invalid YAML: unsupported node');
  };

  const pairsToMap = (pairs: unknown[], depth: number): Map<unknown, unknown> => {
    const map = new Map<unknown, unknown>();
    for (const pair of pairs) {
      if (!isPair(pair)) continue;
      if (isMergeKey(pair.key)) {
        merge(map, value(pair.value, depth + 1));
      } else {
        const key = value(pair.key, depth + 1);
        map.set(key, value(pair.value, depth + 1));
      }
    }
    return map;
  };

  /**
   * `<<: *a` or `<<: [*a, *b]`: keys of each source not already in the mapping, earlier sources
   * first (the yaml package's and compose's rule). Keys written later in the mapping replace them.
   */
  const merge = (into: Map<unknown, unknown>, source: unknown): void => {
    const sources = Array.isArray(source) ? source : [source];
    for (const s of sources) {
      if (!(s instanceof Map)) fail('invalid YAML: Merge sources must be maps or map aliases');
      copied += s.size;
      if (copied > limits.mergedKeys) {
        fail(`the document's merge keys (<<) copy more than ${limits.mergedKeys} keys`);
      }
      for (const [k, v] of s) if (!into.has(k)) into.set(k, v);
    }
  };

  return value(doc.contents, 0);
}

/** `<<` written plain is a merge key (with the package's merge option it resolves to a symbol). */
function isMergeKey(key: unknown): boolean {
  return isScalar(key) && typeof key.value === 'symbol' && key.value.description === '<<';
}

function cut(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}
