// The CLI's two failures: a usage error (exit 2 with the command's usage line) and a runtime error
// (`svc: <message>` on stderr). Kept apart from command.ts so that any module may throw them
// without importing what a command is.
import type { Command } from './command.ts';

/** A usage error: exit 2 with the command's usage line. */
export class UsageError extends Error {
  readonly command: Command | undefined;
  constructor(message: string, command?: Command) {
    super(message);
    this.command = command;
  }
}

/** A runtime error: `svc: <message>` on stderr, exit 1 (or `code`). */
export class CliError extends Error {
  readonly code: number;
  constructor(message: string, code = 1) {
    super(message);
    this.code = code;
  }
}
