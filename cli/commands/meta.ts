// `help`, `completion` and the verbs the spec declares unavailable.
import type { Command } from '../command.ts';
import { completionScript } from '../completion.ts';
import { CliError, UsageError } from '../errors.ts';
import { helpFor } from '../help.ts';

export const help: Command = {
  words: ['help'],
  local: true,
  summary: 'Describe every command, or one command and its flags',
  flags: [],
  positionals: [{ name: 'command', optional: true, variadic: true }],
  async run(ctx) {
    ctx.io.out(helpFor(ctx.commands, ctx.args));
    return 0;
  },
};

export const completion: Command = {
  words: ['completion'],
  local: true,
  summary: 'Print a shell completion script: svc completion bash|zsh',
  details: 'bash: source <(svc completion bash)\nzsh:  source <(svc completion zsh)',
  flags: [],
  positionals: [{ name: 'shell' }],
  async run(ctx) {
    const shell = ctx.args[0];
    if (shell !== 'bash' && shell !== 'zsh')
      throw new UsageError(`unknown shell '${shell}': bash or zsh`, completion);
    ctx.io.out(completionScript(shell, ctx.commands));
    return 0;
  },
};

/** The build version stamped by the release build (`dev` when run from the sources). */
export const CLI_VERSION = process.env.SVC_BUILD_VERSION || 'dev';

export const version: Command = {
  words: ['version'],
  local: true,
  summary: 'Print the build version of svc',
  flags: [],
  positionals: [],
  async run(ctx) {
    ctx.io.out(`svc ${CLI_VERSION}\n`);
    return 0;
  },
};

export const UNAVAILABLE = ['promote', 'prove', 'sheet', 'export', 'import'];

export const unavailable: Command[] = UNAVAILABLE.map((verb) => ({
  words: [verb],
  summary: 'Not available',
  // Refused whatever follows it: the verb itself is the error, not its arguments.
  lenient: true,
  unavailable: true,
  local: true,
  flags: [],
  positionals: [],
  async run() {
    throw new CliError(`${verb} is not available`);
  },
}));
