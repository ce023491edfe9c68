// `svc --help`, `svc <verb> --help`, `svc help [verb]`: rendered from the command records.
import { type Command, type FlagSpec, lookup, usageLine } from './command.ts';

const GROUP_SUMMARY: Record<string, string> = {
  project: 'Projects and their environments',
  cloud: 'Cloud credentials and provisioning',
  host: 'Hosts that run environments',
  env: 'Environments (addressed by id)',
  files: 'Files in and out of a service (tar archives)',
  fs: 'Single files of a service',
  deployment: 'Deployments and their phases',
};

const ENVIRONMENT = `Environment:
  SVC_API_KEY      API key; when set, the config file is not read
  SVC_SERVER       Control plane URL (else the config file's server, else http://localhost:8080)
  XDG_CONFIG_HOME  The config file is $XDG_CONFIG_HOME/svc/config.json, else ~/.config/svc/config.json
`;

const isAvailable = (c: Command) => !c.unavailable;

function flagRows(flags: FlagSpec[]): string[][] {
  const rows = flags.map((f) => {
    const names = f.short ? `-${f.short}, --${f.name}` : `--${f.name}`;
    const left = f.type === 'string' ? `${names} ${f.value ?? 'V'}` : names;
    const dflt = f.default !== undefined && f.type === 'string' ? ` (default ${f.default})` : '';
    return [left, f.help + dflt];
  });
  rows.push(['-h, --help', 'Show this help']);
  return rows;
}

function table(rows: string[][], indent = '  '): string {
  const width = Math.max(...rows.map((r) => r[0].length));
  return rows.map(([l, r]) => `${indent}${l.padEnd(width)}  ${r}`.trimEnd()).join('\n');
}

export function commandHelp(c: Command): string {
  let out = `Usage: ${usageLine(c)}\n\n${c.summary}.\n`;
  if (c.details) out += `\n${c.details}\n`;
  out += `\nFlags (before any positional argument):\n${table(flagRows(c.flags))}\n`;
  return out;
}

function groupHelp(word: string, group: Command[]): string {
  const lines = group.map((c) => `  ${usageLine(c)}\n      ${c.summary}`);
  return `${GROUP_SUMMARY[word] ?? word}.\n\nCommands:\n${lines.join('\n')}\n\nRun svc ${word} <command> --help for its flags.\n`;
}

export function globalHelp(commands: readonly Command[]): string {
  const available = commands.filter(isAvailable);
  const lines = available.map((c) => `  ${usageLine(c)}\n      ${c.summary}`);
  const unavailable = commands.filter((c) => !isAvailable(c)).map((c) => c.words[0]);
  return (
    'svc: the command-line client of the environment control service.\n\n' +
    'Usage: svc <command> [flags] [arguments]\n' +
    'Flags go before positional arguments; a flag after a positional is an error.\n' +
    'Commands that start a deployment wait for it unless --wait=false.\n\n' +
    `Commands:\n${lines.join('\n')}\n\n` +
    (unavailable.length ? `Not available: ${unavailable.join(', ')}.\n\n` : '') +
    ENVIRONMENT +
    '\nExit status: 0 success, 1 error (svc: <message> on stderr), 2 usage error.\n' +
    'Run svc <command> --help for a command and its flags.\n'
  );
}

/** Help for the words given (none: everything). Unknown words throw a UsageError. */
export function helpFor(commands: readonly Command[], words: string[]): string {
  if (words.length === 0) return globalHelp(commands);
  const found = lookup(commands, words);
  if (found.command) return commandHelp(found.command);
  return groupHelp(words[0], found.group ?? []);
}
