// Most verbs are one request whose JSON answer is printed as it is: this builds them from data.
import type { Command, PositionalSpec } from '../command.ts';

export interface SimpleSpec {
  words: string[];
  summary: string;
  details?: string;
  positionals?: PositionalSpec[];
  method?: 'GET' | 'POST' | 'DELETE';
  /** The API path for the positional arguments (already encoded by the caller where needed). */
  path(args: string[]): string;
}

export function simple(spec: SimpleSpec): Command {
  return {
    words: spec.words,
    summary: spec.summary,
    details: spec.details,
    flags: [],
    positionals: spec.positionals ?? [],
    async run(ctx) {
      ctx.io.json(await ctx.client().json(spec.method ?? 'GET', spec.path(ctx.args)));
      return 0;
    },
  };
}
