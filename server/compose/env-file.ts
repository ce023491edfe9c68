// `.env` and `env_file:` files: KEY=VALUE lines as compose reads them. `#` starts a comment line,
// `export ` is allowed, single quotes are literal, double quotes take \n \t \" \\ escapes, and an
// unquoted value ends at ` #`. Parsed line by line with plain string operations (bounded, no regex
// over a whole value).
import { fail } from './tree.ts';

const MAX_LINES = 10_000;
const KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,255}$/;

export function parseEnvFile(text: string, where: string): Record<string, string> {
  const out: [string, string][] = [];
  const lines = text.split(/\r?\n/);
  if (lines.length > MAX_LINES) fail(`${where}: more than ${MAX_LINES} lines`);
  lines.forEach((raw, i) => {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (line.startsWith('export ')) line = line.slice(7).trimStart();
    const eq = line.indexOf('=');
    const key = (eq < 0 ? line : line.slice(0, eq)).trim();
    if (!KEY.test(key)) fail(`${where}: line ${i + 1}: '${key.slice(0, 60)}' is not a variable name`);
    // A bare name (no '=') takes its value from the shell in compose; there is none here.
    if (eq < 0) return;
    out.push([key, value(line.slice(eq + 1).trim(), `${where}: line ${i + 1}`)]);
  });
  return Object.fromEntries(out);
}

function value(v: string, where: string): string {
  const q = v[0];
  if (q === "'" || q === '"') {
    const end = v.indexOf(q, 1);
    if (end < 0 && q === "'") fail(`${where}: the quoted value has no closing ${q}`);
    if (q === "'") return v.slice(1, end);
    return doubleQuoted(v, where);
  }
  const comment = v.indexOf(' #');
  return (comment < 0 ? v : v.slice(0, comment)).trimEnd();
}

function doubleQuoted(v: string, where: string): string {
  let out = '';
  for (let i = 1; i < v.length; i++) {
    const c = v[i];
    if (c === '"') return out;
    if (c === '\\' && i + 1 < v.length) {
      const n = v[++i];
      out += n === 'n' ? '\n' : n === 't' ? '\t' : n === 'r' ? '\r' : n;
    } else out += c;
  }
  return fail(`${where}: the quoted value has no closing "`);
}
