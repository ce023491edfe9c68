// The CLI's dispatch: finds the command by its words, parses its flags, checks for a credential
// when the command talks to the server, runs it, and turns every failure into one line:
// usage errors exit 2 with the usage line, other errors print `svc: <message>` and exit 1.
import { parseCommandArgs } from './args.ts';
import { type Command, lookup, type Output, type RunContext, usageLine } from './command.ts';
import { COMMANDS } from './commands/index.ts';
import { type Config, NOT_SIGNED_IN, resolveConfig } from './config.ts';
import { CliError, UsageError } from './errors.ts';
import { commandHelp, globalHelp, helpFor } from './help.ts';
import { Client } from './http.ts';

type Env = Record<string, string | undefined>;

export function stdio(): Output {
  // A closed pipe (svc help | head) is not an error worth a stack trace.
  process.stdout.on('error', () => {});
  return {
    out: (text) => void process.stdout.write(text),
    err: (text) => void process.stderr.write(text),
    json: (value) => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`),
    tty: process.stdout.isTTY === true,
  };
}

const isHelp = (w: string | undefined) => w === '--help' || w === '-h';

function context(cmd: Command, flags: RunContext['flags'], args: string[], io: Output, env: Env): RunContext {
  let config: Config | undefined;
  const ctx: RunContext = {
    flags,
    args,
    io,
    env,
    commands: COMMANDS,
    config: () => {
      config ??= resolveConfig(env);
      return config;
    },
    client: () => {
      const c = ctx.config();
      if (!c.apiKey) throw new CliError(NOT_SIGNED_IN);
      return new Client(c.server, c.apiKey);
    },
  };
  // Fail before any local work (reading files, packing) when the command cannot reach the API.
  if (!cmd.local) ctx.client();
  return ctx;
}

async function dispatch(argv: string[], io: Output, env: Env): Promise<number> {
  if (argv.length === 0) {
    io.err(globalHelp(COMMANDS));
    return 2;
  }
  if (isHelp(argv[0])) {
    io.out(globalHelp(COMMANDS));
    return 0;
  }
  const found = lookup(COMMANDS, argv);
  const cmd = found.command;
  if (!cmd) {
    const text = helpFor(COMMANDS, [argv[0]]);
    if (isHelp(found.rest[0])) {
      io.out(text);
      return 0;
    }
    io.err(`svc: ${argv[0]} needs a command\n${text}`);
    return 2;
  }
  const parsed = parseCommandArgs(cmd, found.rest);
  if (parsed.help) {
    io.out(commandHelp(cmd));
    return 0;
  }
  return (await cmd.run(context(cmd, parsed.flags, parsed.args, io, env))) ?? 0;
}

/** Runs one invocation; returns the exit code. */
export async function main(argv: string[], env: Env = process.env, io: Output = stdio()): Promise<number> {
  try {
    return await dispatch(argv, io, env);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`svc: ${err.message}\n`);
      io.err(`usage: ${err.command ? usageLine(err.command) : 'svc <command> [flags] [arguments]'}\n`);
      if (!err.command) io.err('Run svc --help for the commands.\n');
      return 2;
    }
    if (err instanceof CliError) {
      io.err(`svc: ${err.message}\n`);
      return err.code;
    }
    // Not expected: still one line, the stack only on request.
    io.err(`svc: ${(err as Error)?.message ?? String(err)}\n`);
    if (env.SVC_DEBUG) io.err(`${(err as Error)?.stack ?? ''}\n`);
    return 1;
  }
}
