// `cloud connect|list` and `host list|join-token`: where environments can run.
import type { ApiBody } from '../api-types.ts';
import { type Command, givenFlags } from '../command.ts';
import { simple } from './simple.ts';

type Provider = ApiBody<'post', '/v1/clouds'>['provider'];

export const cloudConnect: Command = {
  words: ['cloud', 'connect'],
  summary: 'Connect a cloud: manual, cloudvm, sandbox-a or sandbox-b (POST /v1/clouds)',
  details: 'The config holds only the flags that were given, as token, server_type and location.',
  flags: [
    { name: 'name', type: 'string', value: 'N', help: 'Cloud name (server default: the provider)' },
    { name: 'token', type: 'string', value: 'T', help: 'Provider API token (config.token)' },
    { name: 'server-type', type: 'string', value: 'T', help: 'Machine type, cloudvm (config.server_type)' },
    { name: 'location', type: 'string', value: 'L', help: 'Location, cloudvm (config.location)' },
  ],
  positionals: [{ name: 'provider' }],
  async run(ctx) {
    const config = givenFlags(ctx.flags, {
      token: 'token',
      'server-type': 'server_type',
      location: 'location',
    });
    // The provider is passed as given: the server's refusal names the providers it takes.
    const body: ApiBody<'post', '/v1/clouds'> = {
      provider: ctx.args[0] as Provider,
      ...givenFlags(ctx.flags, { name: 'name' }),
    };
    if (Object.keys(config).length > 0) body.config = config;
    ctx.io.json(await ctx.client().call('post', '/v1/clouds', { json: body }));
    return 0;
  },
};

export const cloudList = simple({
  words: ['cloud', 'list'],
  summary: "List the team's clouds, secrets masked (GET /v1/clouds)",
  method: 'get',
  route: '/v1/clouds',
  options: () => ({}),
});

export const hostList = simple({
  words: ['host', 'list'],
  summary: "List the team's hosts and whether each is connected (GET /v1/hosts)",
  method: 'get',
  route: '/v1/hosts',
  options: () => ({}),
});

export const hostJoinToken = simple({
  words: ['host', 'join-token'],
  summary: 'Mint a one-hour, single-use join token and its install line (POST /v1/join-tokens)',
  method: 'post',
  route: '/v1/join-tokens',
  options: () => ({ json: {} }),
});
