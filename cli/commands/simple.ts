// Most verbs are one request whose JSON answer is printed as it is: this builds them from data.
// The route is a path template of the API's OpenAPI and its options are checked against it.
import type { ApiOptions, PathOf } from '../api-types.ts';
import type { Command, PositionalSpec } from '../command.ts';

export interface SimpleSpec<M extends 'get' | 'post' | 'delete', P extends PathOf<M>> {
  words: string[];
  summary: string;
  details?: string;
  positionals?: PositionalSpec[];
  method: M;
  route: P;
  /** The request's path parameters (and query) for the positional arguments. */
  options(args: string[]): ApiOptions<M, P>;
}

export function simple<M extends 'get' | 'post' | 'delete', P extends PathOf<M>>(
  spec: SimpleSpec<M, P>,
): Command {
  return {
    words: spec.words,
    summary: spec.summary,
    details: spec.details,
    flags: [],
    positionals: spec.positionals ?? [],
    async run(ctx) {
      ctx.io.json(await ctx.client().call(spec.method, spec.route, spec.options(ctx.args)));
      return 0;
    },
  };
}
