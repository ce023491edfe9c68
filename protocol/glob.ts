// A .dockerignore pattern as @balena/dockerignore means it, matched in time linear in the path
// (times the pattern's length). The library turns each pattern into a regular expression and
// passes every other character through as regex syntax, so a tenant's `(a+)+b`, or a chain of
// `**/` or `*a*a*…`, backtracks exponentially or polynomially on a long path name and holds the
// event loop of the svcd that packs the build context (every tenant of the host) for minutes.
// Here the same tokens run as a set of states advanced one character at a time, never
// backtracking: `*` any run without '/', `?` one character but '/', `**` before more of the
// pattern any run ending in '/' (or none), `**` at the end anything, `[…]` a character class, `\x`
// the character x, anything else itself (Docker's Go matcher reads `(`, `+`, `{`… as themselves).

type Token =
  | { t: 'lit'; c: number }
  | { t: 'one' }
  | { t: 'star' }
  | { t: 'any' }
  | { t: 'dirs' }
  | { t: 'class'; negate: boolean; ranges: [number, number][] };

/** What `.` in a regular expression without the `s` flag does not match. */
const lineEnd = (c: number) => c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
const SLASH = 47;

/** `[...]` from `i` (just past '['): the class and the index past its ']', or null when unclosed. */
function classAt(p: string, i: number): { token: Token; next: number } | null {
  let negate = false;
  if (p[i] === '^') {
    negate = true;
    i++;
  }
  const ranges: [number, number][] = [];
  const char = (): number | null => {
    if (i >= p.length) return null;
    if (p[i] === '\\' && i + 1 < p.length) {
      i += 2;
      return p.charCodeAt(i - 1);
    }
    return p.charCodeAt(i++);
  };
  // A ']' right after '[' or '[^' closes an empty class in a regular expression, as here.
  while (i < p.length && p[i] !== ']') {
    const lo = char();
    if (lo === null) return null;
    if (p[i] === '-' && i + 1 < p.length && p[i + 1] !== ']') {
      i++;
      const hi = char();
      // An unclosed class or one out of order is no pattern (Go's ErrBadPattern): it matches nothing.
      if (hi === null || hi < lo) return null;
      ranges.push([lo, hi]);
    } else ranges.push([lo, lo]);
  }
  if (i >= p.length) return null;
  return { token: { t: 'class', negate, ranges }, next: i + 1 };
}

/** The pattern's tokens, as the library's `_compile` reads it (path separator '/'). */
function tokens(p: string): Token[] | null {
  const out: Token[] = [];
  for (let i = 0; i < p.length; i++) {
    const ch = p[i];
    if (ch === '*') {
      if (p[i + 1] === '*') {
        i++;
        if (p[i + 1] === '/') i++;
        out.push(p[i + 1] === undefined ? { t: 'any' } : { t: 'dirs' });
      } else out.push({ t: 'star' });
    } else if (ch === '?') out.push({ t: 'one' });
    else if (ch === '\\') out.push({ t: 'lit', c: i + 1 < p.length ? p.charCodeAt(++i) : 92 });
    else if (ch === '[') {
      const cls = classAt(p, i + 1);
      if (!cls) return null;
      out.push(cls.token);
      i = cls.next - 1;
    } else out.push({ t: 'lit', c: p.charCodeAt(i) });
  }
  return simplify(out);
}

/**
 * The same language with fewer states: `**` then `**` is one `**` (any run ending in '/', twice,
 * is one such run), `**` then a final `**` is the final one, `*` then `*` is one `*`. So a
 * pattern of thousands of stars is a state or two, not thousands visited at every character.
 */
function simplify(toks: Token[]): Token[] {
  const out: Token[] = [];
  for (const tok of toks) {
    const last = out.at(-1)?.t;
    if ((tok.t === 'dirs' || tok.t === 'star') && last === tok.t) continue;
    if (tok.t === 'any' && last === 'dirs') out.pop();
    out.push(tok);
  }
  return out;
}

const unit = (c: number) => `\\u${c.toString(16).padStart(4, '0')}`;

/** The token as the library's regular expression has it, its characters escaped. */
function regexOf(t: Token): string {
  switch (t.t) {
    case 'lit':
      return unit(t.c);
    case 'one':
      return '[^/]';
    case 'star':
      return '[^/]*';
    case 'any':
      return '.*';
    case 'dirs':
      return '(?:.*/)?';
    case 'class':
      return `[${t.negate ? '^' : ''}${t.ranges.map(([lo, hi]) => `${unit(lo)}-${unit(hi)}`).join('')}]`;
  }
}

function inClass(tok: Extract<Token, { t: 'class' }>, c: number): boolean {
  const hit = tok.ranges.some(([lo, hi]) => c >= lo && c <= hi);
  return tok.negate ? !hit : hit;
}

/**
 * The test of one pattern: whether the whole of a path matches it. A pattern the library could
 * not compile either (an unclosed `[`) matches nothing.
 */
export function globTest(pattern: string): (path: string) => boolean {
  const toks = tokens(pattern);
  if (!toks) return () => false;
  // With at most one unbounded run of each reach (one `*`, one `**`), a regular expression of
  // the tokens (every literal escaped) cannot backtrack beyond one pass per '/' of the path: it
  // is used, as it is many times faster per character than the states below. Beyond that, states.
  const runs = (k: Token['t'][]) => toks.filter((t) => k.includes(t.t)).length;
  if (runs(['star']) <= 1 && runs(['dirs', 'any']) <= 1) {
    const re = new RegExp(`^${toks.map(regexOf).join('')}$`);
    return (path) => re.test(path);
  }
  const n = toks.length;
  // States 0..n: before token i. States n+1+i: inside the `(.*/)?` of a `dirs` token i.
  const inside = (i: number) => n + 1 + i;
  // A state is in the set of step `gen` when mark[state] === gen: no set is allocated or cleared
  // per character.
  const mark = new Float64Array(2 * n + 1).fill(-1);
  let gen = 0;
  // Adds `from` and every state reachable from it without a character (a stack, not recursion).
  const todo: number[] = [];
  const listA: number[] = [];
  const listB: number[] = [];
  const close = (list: number[], from: number) => {
    todo.push(from);
    while (todo.length > 0) {
      const s = todo.pop() as number;
      if (mark[s] === gen) continue;
      mark[s] = gen;
      list.push(s);
      if (s >= n) continue;
      const t = toks[s].t;
      if (t === 'star' || t === 'any') todo.push(s + 1);
      else if (t === 'dirs') todo.push(s + 1, inside(s));
    }
  };
  return (path) => {
    gen++;
    let list = listA;
    let spare = listB;
    list.length = 0;
    close(list, 0);
    // By UTF-16 unit, as a regular expression without the `u` flag reads it.
    for (let at = 0; at < path.length; at++) {
      const c = path.charCodeAt(at);
      const from = list;
      list = spare;
      spare = from;
      list.length = 0;
      gen++;
      for (const s of from) {
        if (s > n) {
          // Inside a `dirs` group: any character stays; '/' may also end it.
          if (lineEnd(c)) continue;
          close(list, s);
          if (c === SLASH) close(list, s - n);
          continue;
        }
        if (s === n) continue;
        const tok = toks[s];
        if (tok.t === 'lit' ? c === tok.c : tok.t === 'one' ? c !== SLASH : false) close(list, s + 1);
        else if (tok.t === 'class' && inClass(tok, c)) close(list, s + 1);
        else if (tok.t === 'star' && c !== SLASH) close(list, s);
        else if (tok.t === 'any' && !lineEnd(c)) close(list, s);
      }
      if (list.length === 0) return false;
    }
    return mark[n] === gen;
  };
}
