// Flag parsing rules (spec "Command-line client"): flags go before positionals, and a flag after a
// positional is a positional, which then fails. The flag part (everything before the first
// positional, or before `--`) is parsed by node's util.parseArgs with the command's flag list;
// `--flag=value` works, boolean flags also take `=true`/`=false` (`--wait=false`).
import { type ParseArgsConfig, parseArgs } from 'node:util';
import type { Command, FlagSpec, FlagValues } from './command.ts';
import { UsageError } from './errors.ts';

export interface Parsed {
  flags: FlagValues;
  args: string[];
  help: boolean;
}

const HELP: FlagSpec = { name: 'help', short: 'h', type: 'boolean', help: 'Show this help' };

const isFlagToken = (t: string) => t.length > 1 && t.startsWith('-');

function lookup(flags: FlagSpec[], token: string): { spec?: FlagSpec; inline: boolean; name: string } {
  if (token.startsWith('--')) {
    const eq = token.indexOf('=');
    const name = eq < 0 ? token.slice(2) : token.slice(2, eq);
    return { spec: flags.find((f) => f.name === name), inline: eq >= 0, name: `--${name}` };
  }
  const short = token[1];
  return { spec: flags.find((f) => f.short === short), inline: token.length > 2, name: `-${short}` };
}

interface Split {
  flagTokens: string[];
  explicit: FlagValues;
  positionals: string[];
  /** Whether `--` ended the flags (positionals after it may start with a dash). */
  terminated: boolean;
}

/** Walks the flag part: knows which flags take a value, so it finds where positionals begin. */
function split(cmd: Command, flags: FlagSpec[], argv: string[]): Split {
  const out: Split = { flagTokens: [], explicit: {}, positionals: [], terminated: false };
  let i = 0;
  for (; i < argv.length; i++) {
    const t = argv[i];
    if (t === '--') {
      out.terminated = true;
      i++;
      break;
    }
    if (!isFlagToken(t)) {
      // Login ignores what it does not know, so it looks for its own flags everywhere.
      if (cmd.lenient) continue;
      break;
    }
    const { spec, inline, name } = lookup(flags, t);
    if (!spec) {
      if (cmd.lenient) continue;
      throw new UsageError(`unknown flag ${name}`, cmd);
    }
    if (spec.type === 'boolean') {
      if (inline && t.startsWith('--')) {
        const value = t.slice(t.indexOf('=') + 1);
        if (value !== 'true' && value !== 'false')
          throw new UsageError(`${name} takes true or false, not '${value}'`, cmd);
        out.explicit[spec.name] = value === 'true';
        continue;
      }
      // `-it`: short boolean flags written together (parseArgs takes the group as it is).
      const group =
        !t.startsWith('--') &&
        [...t.slice(1)].every((c) => flags.some((f) => f.short === c && f.type === 'boolean'));
      if (inline && !group) throw new UsageError(`${name} takes no value`, cmd);
      out.flagTokens.push(t);
      continue;
    }
    out.flagTokens.push(t);
    if (inline) continue;
    const value = argv[i + 1];
    if (value === undefined || isFlagToken(value))
      throw new UsageError(
        `${name} needs a value${value ? ` (write ${name}=${value} if you mean it)` : ''}`,
        cmd,
      );
    out.flagTokens.push(value);
    i++;
  }
  out.positionals = argv.slice(i);
  return out;
}

function checkPositionals(cmd: Command, args: string[], terminated: boolean): void {
  const fixed = cmd.positionals.filter((p) => !p.variadic);
  const variadic = cmd.positionals.find((p) => p.variadic);
  const required = fixed.filter((p) => !p.optional).length + (variadic && !variadic.optional ? 1 : 0);
  // A dash-word among the fixed positionals is a flag written too late; in a variadic tail
  // (exec's command) it belongs to that command.
  const checked = args.slice(0, variadic ? fixed.length : args.length);
  const late = terminated ? undefined : checked.find(isFlagToken);
  if (late)
    throw new UsageError(`flag ${late} after a positional argument: flags go before positionals`, cmd);
  if (args.length < required) {
    const missing = cmd.positionals.filter((p) => !p.optional)[args.length] ?? variadic;
    throw new UsageError(`missing <${missing?.name}>`, cmd);
  }
  if (!variadic && args.length > fixed.length)
    throw new UsageError(`unexpected argument '${args[fixed.length]}'`, cmd);
}

export function parseCommandArgs(cmd: Command, argv: string[]): Parsed {
  const flags = [...cmd.flags, HELP];
  const s = split(cmd, flags, argv);
  const options: ParseArgsConfig['options'] = {};
  for (const f of flags) options[f.name] = { type: f.type, ...(f.short ? { short: f.short } : {}) };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: s.flagTokens, options, strict: true, allowPositionals: false })
      .values as Record<string, string | boolean | undefined>;
  } catch (err) {
    throw new UsageError((err as Error).message, cmd);
  }
  const help = values.help === true;
  delete values.help;
  const result: FlagValues = {};
  for (const f of cmd.flags) {
    const v = s.explicit[f.name] ?? values[f.name] ?? f.default;
    if (v !== undefined) result[f.name] = v;
  }
  if (help) return { flags: result, args: s.positionals, help };
  for (const f of cmd.flags) {
    if (f.required && result[f.name] === undefined) throw new UsageError(`--${f.name} is required`, cmd);
  }
  if (!cmd.lenient) checkPositionals(cmd, s.positionals, s.terminated);
  return { flags: result, args: s.positionals, help };
}
