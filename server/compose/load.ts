// Text → tree: size and work limits, YAML (merge keys on; anchors resolved in yaml-tree.ts), then compose interpolation of
// every string value with the caller's variables only (never the server's own process.env).
import { type Document, isAlias, isMap, isPair, isScalar, isSeq, Lexer, parseDocument } from 'yaml';
import { ComposeError, fail, type Node, type NodeMap } from './tree.ts';
import { documentValue } from './yaml-tree.ts';

export const MAX_COMPOSE_BYTES = 1024 * 1024;
const MAX_DEPTH = 64;
const MAX_NESTED_INTERPOLATION = 16;
/** Values (scalars, lists, mappings) after alias expansion. */
const MAX_VALUES = 500_000;
/** Keys of one mapping: more than any real file (500 services, a few thousand variables). */
export const MAX_KEYS_PER_MAPPING = 10_000;

export interface Loaded {
  root: NodeMap;
  /** Variables referenced without a value or default; compose substitutes '' and warns. */
  unset: string[];
}

export function loadCompose(text: unknown, env: Record<string, string>): Loaded {
  if (typeof text !== 'string') {
    fail('the compose file must be text');
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_COMPOSE_BYTES) {
    fail(`the compose file is ${bytes} bytes; the limit is 1 MiB`);
  }
  const lf = normalizeBreaks(text);
  checkFlowDepth(lf);
  checkTokens(lf);
  const raw = parseYaml(lf);
  if (raw === null || raw === undefined) {
    fail('the compose file is empty; it needs a services: mapping');
  }
  const unset = new Set<string>();
  const root = convert(raw, '', 0, { env, unset, values: 0 });
  if (!(root instanceof Map)) {
    fail('the top level of a compose file must be a mapping with services:');
  }
  return { root, unset: [...unset].sort() };
}

/**
 * YAML 1.2 has three line breaks: LF, CR LF and a lone CR. The yaml package knows only the first
 * two, so a file broken by lone CRs was one long line to it, and each of its errors cost a scan of
 * that line (a 529 kB file held the event loop 87 s). Every break becomes LF before anything
 * counts lines or parses, which is also what YAML does to breaks inside scalars. NEL, LS and PS
 * are breaks only in YAML 1.1; the package (and YAML 1.2) read them as ordinary characters, so they
 * start no line here either.
 */
function normalizeBreaks(text: string): string {
  return text.includes('\r') ? text.replace(/\r\n?/g, '\n') : text;
}

function parseYaml(text: string): unknown {
  try {
    // The package's own uniqueKeys check compares each key with every earlier one (quadratic:
    // 80k keys took 50 s); checkKeys below does the same refusal in one pass. Its pretty errors
    // scan the error's whole line for every error (errors × line length on one long line):
    // only the first problem is reported, placed by one bounded pass of our own.
    const doc = parseDocument(text, { merge: true, uniqueKeys: false, prettyErrors: false });
    const problem = doc.errors[0] ?? doc.warnings[0];
    if (problem) {
      fail(`invalid YAML: ${firstLine(problem.message)}${placeOf(text, problem.pos?.[0])}`);
    }
    checkKeys(doc);
    // Not the package's toJS: its alias resolution is not bounded by the input (yaml-tree.ts).
    return documentValue(doc, { mergedKeys: MAX_VALUES });
  } catch (err) {
    if (err instanceof ComposeError) {
      throw err;
    }
    // Alias bombs, unresolved aliases and pathological nesting surface as thrown errors.
    const message = err instanceof Error ? err.message : String(err);
    return fail(`invalid YAML: ${firstLine(message)}`);
  }
}

/** Flow brackets nested past this are refused before the YAML parser sees them. */
const MAX_FLOW_NESTING = 1000;
/** Lines plus flow separators: 25 times the largest real file of the corpus (788 lines). */
export const MAX_ENTRIES = 20_000;

/**
 * The yaml package recurses per flow level and takes seconds to fail on a megabyte of `[[[[`
 * (14 s at 500k levels). One linear pass counts `[`/`{` not yet closed, wherever they are (quotes
 * are not skipped: a stray apostrophe in a plain scalar must not hide what follows). Real files
 * stay far below the bound, and anything past 64 levels is refused later anyway.
 */
function checkFlowDepth(text: string): void {
  let depth = 0;
  let entries = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // The parser spends ~10 µs an entry: 80k keys in a megabyte still took seconds.
    if ((c === 0x0a || c === 0x2c) /* \n , */ && ++entries > MAX_ENTRIES) {
      fail(`the compose file has more than ${MAX_ENTRIES} lines and flow items; that is not a compose file`);
    }
    if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_FLOW_NESTING) fail(`the document is nested deeper than ${MAX_DEPTH} levels`);
    } else if ((c === 0x5d || c === 0x7d) && depth > 0) depth--;
  }
}

/**
 * YAML tokens (the lexer's: scalars, indicators, spaces, breaks) the parser may see: 30 times
 * the largest compose file of the corpus (sentry self-hosted, 4,719). One line can hold many
 * nodes (`a: b: c: …`, `- - - …`), which the line bound above does not see, and the parser and
 * composer spend a few µs a token (a megabyte of `a: ` took 6 s).
 */
export const MAX_TOKENS = 150_000;

/** Lexing is linear and stops at the bound, so this costs at most MAX_TOKENS tokens' lexing. */
function checkTokens(text: string): void {
  let tokens = 0;
  for (const _ of new Lexer().lex(text)) {
    if (++tokens > MAX_TOKENS) {
      fail(`the compose file has more than ${MAX_TOKENS} YAML tokens; that is not a compose file`);
    }
  }
}

/**
 * One pass over the document as written (aliases not expanded): bounds the node count and the
 * keys of each mapping, and refuses a repeated key as the yaml package's uniqueKeys would (equal
 * scalar values; merge keys `<<` may repeat). Iterative, so deep nesting cannot overflow here.
 */
function checkKeys(doc: Document): void {
  const stack: unknown[] = [doc.contents];
  let nodes = 0;
  while (stack.length) {
    const node = stack.pop();
    if (++nodes > MAX_VALUES) {
      fail(`the document has more than ${MAX_VALUES} values`);
    }
    if (isSeq(node)) {
      stack.push(...node.items);
    } else if (isMap(node)) {
      if (node.items.length > MAX_KEYS_PER_MAPPING) {
        fail(`a mapping has more than ${MAX_KEYS_PER_MAPPING} keys (${node.items.length})`);
      }
      const seen = new Set<string>();
      for (const pair of node.items) {
        if (!isPair(pair)) continue;
        const key = pair.key;
        if (isScalar(key) && typeof key.value !== 'symbol' && key.value !== '<<') {
          const id = `${typeof key.value}:${String(key.value)}`;
          if (seen.has(id)) {
            fail(`invalid YAML: map keys must be unique; '${String(key.value).slice(0, 100)}' appears twice`);
          }
          seen.add(id);
        } else if (!isScalar(key) && !isAlias(key)) {
          stack.push(key);
        }
        stack.push(pair.value);
      }
    }
  }
}

/** A message's first line, cut short: some quote the source (an alias name, a whole scalar). */
function firstLine(message: string): string {
  const nl = message.indexOf('\n');
  const line = nl < 0 ? message : message.slice(0, nl);
  const cut = line.length > MAX_MESSAGE ? `${line.slice(0, MAX_MESSAGE)}…` : line;
  return cut.endsWith(':') ? cut.slice(0, -1) : cut;
}

const MAX_MESSAGE = 200;

/** ` at line L, column C` for a source offset, in one pass up to it. */
function placeOf(text: string, offset: number | undefined): string {
  if (offset === undefined || offset < 0 || offset > text.length) return '';
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return ` at line ${line}, column ${offset - start + 1}`;
}

interface Vars {
  env: Record<string, string>;
  unset: Set<string>;
  /** Values converted so far, against MAX_VALUES. */
  values?: number;
}

function convert(value: unknown, path: string, depth: number, vars: Vars): Node {
  if (depth > MAX_DEPTH) {
    fail(`${path || 'the document'} is nested deeper than ${MAX_DEPTH} levels`);
  }
  vars.values = (vars.values ?? 0) + 1;
  if (vars.values > MAX_VALUES) {
    fail(`the document expands to more than ${MAX_VALUES} values (through aliases?)`);
  }
  if (typeof value === 'string') {
    // No process argument, variable or path can carry a NUL byte.
    if (value.includes('\0')) {
      fail(`${path || 'the document'} contains a NUL character`);
    }
    return interpolate(value, path, vars, 0);
  }
  if (value === null || typeof value === 'number' || typeof value === 'boolean') {
    return value;
  }
  if (Array.isArray(value)) {
    return value.map((item, i) => convert(item, `${path}[${i}]`, depth + 1, vars));
  }
  if (value instanceof Map) {
    const out: NodeMap = new Map();
    for (const [key, item] of value) {
      if (key !== null && typeof key === 'object') {
        fail(`invalid YAML: ${path || 'a'} mapping key is not a scalar`);
      }
      const name = String(key);
      out.set(name, convert(item, path ? `${path}.${name}` : name, depth + 1, vars));
    }
    return out;
  }
  return fail(`${path || 'the document'}: unsupported YAML value (binary data or an unknown tag)`);
}

const NAME = /^[_a-zA-Z][_a-zA-Z0-9]*/;
const BRACED = /^([_a-zA-Z][_a-zA-Z0-9]*)(?:(:?[-?+])([\s\S]*))?$/;

/** `$$`, `$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:?e}`, `${VAR?e}`, `${VAR:+r}`, `${VAR+r}`. */
export function interpolate(text: string, where: string, vars: Vars, nesting: number): string {
  if (!text.includes('$')) {
    return text;
  }
  if (nesting > MAX_NESTED_INTERPOLATION) {
    fail(`${where}: interpolation nested too deeply`);
  }
  let out = '';
  let i = 0;
  while (i < text.length) {
    const dollar = text.indexOf('$', i);
    if (dollar < 0) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, dollar);
    const next = text[dollar + 1];
    if (next === '$') {
      out += '$';
      i = dollar + 2;
    } else if (next === '{') {
      const end = closingBrace(text, dollar + 2);
      if (end < 0) {
        fail(`${where}: invalid interpolation format '${text.slice(dollar, dollar + 40)}': no closing }`);
      }
      out += substitute(text.slice(dollar + 2, end), where, vars, nesting);
      i = end + 1;
    } else {
      const name = NAME.exec(text.slice(dollar + 1, dollar + 257))?.[0];
      // Compose keeps a `$` that does not start a variable (`$1`, a trailing `$`) as it is.
      out += name ? lookup(name, vars) : '$';
      i = dollar + 1 + (name?.length ?? 0);
    }
  }
  return out;
}

function closingBrace(text: string, from: number): number {
  let depth = 1;
  for (let j = from; j < text.length; j++) {
    if (text[j] === '{') {
      depth++;
    } else if (text[j] === '}' && --depth === 0) {
      return j;
    }
  }
  return -1;
}

function lookup(name: string, vars: Vars): string {
  if (Object.hasOwn(vars.env, name)) {
    return String(vars.env[name]);
  }
  vars.unset.add(name);
  return '';
}

function substitute(body: string, where: string, vars: Vars, nesting: number): string {
  const m = BRACED.exec(body);
  if (!m) {
    fail(`${where}: invalid interpolation format '\${${body.slice(0, 60)}}'`);
  }
  const [, name, op, arg = ''] = m;
  const set = Object.hasOwn(vars.env, name);
  const value = set ? String(vars.env[name]) : undefined;
  const nested = () => interpolate(arg, where, vars, nesting + 1);
  switch (op) {
    case undefined:
      return lookup(name, vars);
    case ':-':
      return value ? value : nested();
    case '-':
      return set ? (value as string) : nested();
    case ':?':
    case '?':
      if (op === ':?' ? !value : !set) {
        const reason = nested();
        fail(`required variable ${name} is missing a value${reason ? `: ${reason}` : ''} (at ${where})`);
      }
      return value as string;
    case ':+':
      return value ? nested() : '';
    default:
      return set ? nested() : '';
  }
}
