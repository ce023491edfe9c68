// What a CLI command is: data (its words, usage, flags, positionals, help text) plus one function.
// main.ts dispatches on the words, args.ts parses by the flag list, help.ts and completion.ts
// render from the same records, so a flag cannot exist without being documented and completed.
import type { Config } from './config.ts';
import { UsageError } from './errors.ts';
import type { Client } from './http.ts';

export interface FlagSpec {
  /** Long name without dashes, e.g. `project` for `--project`. */
  name: string;
  short?: string;
  type: 'string' | 'boolean';
  /** Placeholder shown in help for string flags, e.g. `P`. */
  value?: string;
  default?: string | boolean;
  required?: boolean;
  help: string;
}

export interface PositionalSpec {
  name: string;
  optional?: boolean;
  /** Takes every remaining argument (exec's command); such arguments may look like flags. */
  variadic?: boolean;
}

export type FlagValues = Record<string, string | boolean | undefined>;

export interface Output {
  out(text: string): void;
  err(text: string): void;
  /** Prints a JSON value indented by two spaces. */
  json(value: unknown): void;
  /** Whether stdout is an interactive terminal (live progress is drawn only then). */
  tty: boolean;
}

export interface RunContext {
  flags: FlagValues;
  args: string[];
  /** The API client for the resolved server and credential; throws "not signed in" without one. */
  client(): Client;
  /** The resolved server and credential (reads the file only when SVC_API_KEY is unset). */
  config(): Config;
  env: Record<string, string | undefined>;
  io: Output;
  /** Every command, for help and completion. */
  commands: readonly Command[];
}

export interface Command {
  /** The words that select it: `['env', 'get']`. */
  words: string[];
  summary: string;
  flags: FlagSpec[];
  positionals: PositionalSpec[];
  /** Overrides the generated usage line (after `svc `). */
  usage?: string;
  /** Longer help, shown by `svc <verb> --help`. */
  details?: string;
  /** Login takes --server and --no-browser and ignores every other flag and argument. */
  lenient?: boolean;
  /** Runs without a server or credential (help, completion, login brings its own). */
  local?: boolean;
  /** A verb the spec names but this client does not offer (listed apart in help). */
  unavailable?: boolean;
  /** Exit code; undefined means 0. */
  run(ctx: RunContext): Promise<number | undefined>;
}

const flagUsage = (f: FlagSpec): string => {
  const dash = f.short ? `-${f.short}` : `--${f.name}`;
  return f.type === 'boolean' ? `[${dash}]` : `[${dash} ${f.value ?? 'V'}]`;
};

/** `svc deploy --project P [--env alpha] ...`: required flags bare, others in brackets. */
export function usageLine(c: Command): string {
  if (c.usage) return `svc ${c.usage}`;
  const parts = ['svc', ...c.words];
  for (const f of c.flags) {
    const u = flagUsage(f);
    parts.push(f.required ? u.slice(1, -1) : u);
  }
  for (const p of c.positionals) {
    const name = p.variadic ? `<${p.name}...>` : `<${p.name}>`;
    parts.push(p.optional ? `[${name}]` : name);
  }
  return parts.join(' ');
}

export interface Lookup {
  command?: Command;
  /** Arguments after the command's words. */
  rest: string[];
  /** A group word (`env`) without a known subcommand: its commands. */
  group?: Command[];
}

/** Finds the command named by the first one or two words; throws UsageError for unknown words. */
export function lookup(commands: readonly Command[], argv: string[]): Lookup {
  const [verb, sub] = argv;
  const candidates = commands.filter((c) => c.words[0] === verb);
  if (candidates.length === 0) throw new UsageError(`unknown command '${verb}' (svc --help lists them)`);
  if (candidates[0].words.length === 1) return { command: candidates[0], rest: argv.slice(1) };
  const command = candidates.find((c) => c.words[1] === sub);
  if (command) return { command, rest: argv.slice(2) };
  if (sub === undefined || sub.startsWith('-')) return { group: candidates, rest: argv.slice(1) };
  const subs = candidates.map((c) => c.words[1]).join(', ');
  throw new UsageError(`unknown command '${verb} ${sub}' (${verb} takes ${subs})`);
}

/** The flags that were given, renamed to body fields: `{ 'server-type': 'server_type' }`. */
export function givenFlags(flags: FlagValues, fields: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [flag, field] of Object.entries(fields)) {
    const v = flags[flag];
    if (typeof v === 'string') out[field] = v;
  }
  return out;
}
