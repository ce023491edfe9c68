// Sign-in, teams and keys: POST /auth/dev-login, GET /v1/me, GET/POST /v1/teams,
// GET/POST /v1/keys, DELETE /v1/keys/{id}.

import { Type } from '@sinclair/typebox';
import { DevLoginBody, KeyCreateBody, TeamCreateBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import { NotFound } from '../errors.ts';
import type { App } from '../http/app.ts';
import { SMALL_BODY_BYTES } from '../http/limits.ts';
import { emptyBodyIsObject, IdParam, SECURED } from '../http/schema.ts';
import { listKeys, mintKey, newTeam, revokeKey, teamsOf, whoAmI } from './accounts.ts';
import { signIn } from './user-store.ts';

const _Name = (description: string) => Type.String({ minLength: 1, maxLength: 100, description });

export function identityRoutes(app: App, ctx: AppContext): void {
  app.post(
    '/auth/dev-login',
    {
      config: { auth: 'none' },
      bodyLimit: SMALL_BODY_BYTES,
      // Disabled is "not found" before the body is even looked at.
      onRequest: async () => {
        if (!ctx.config.devLogin) throw new NotFound('dev login is disabled (SVC_DEV_LOGIN=1 enables it)');
      },
      schema: {
        tags: ['sign-in'],
        summary: 'Local sign-in without a code host (SVC_DEV_LOGIN=1 only)',
        body: DevLoginBody,
      },
    },
    async (req) => {
      const { token } = await signIn(ctx.db, { email: req.body.email, name: req.body.name });
      return { token };
    },
  );

  const tags = ['teams and keys'];
  app.get(
    '/v1/me',
    { schema: { tags, summary: 'The calling team, its memberships and the user', security: SECURED } },
    async (req) => whoAmI(ctx.db, req.caller),
  );

  app.get(
    '/v1/teams',
    { config: { auth: 'user' }, schema: { tags, summary: "The signed-in user's teams", security: SECURED } },
    async (req) => ({ teams: await teamsOf(ctx.db, req.caller) }),
  );

  app.post(
    '/v1/teams',
    {
      config: { auth: 'user' },
      schema: {
        tags,
        summary: 'Create a team owned by the signed-in user',
        security: SECURED,
        body: TeamCreateBody,
      },
    },
    async (req, reply) => {
      reply.code(201);
      return { team: await newTeam(ctx.db, req.caller, req.body.name) };
    },
  );

  app.get(
    '/v1/keys',
    { schema: { tags, summary: "The team's API keys (never their material)", security: SECURED } },
    async (req) => ({ keys: await listKeys(ctx.db, req.caller.teamId) }),
  );

  app.post(
    '/v1/keys',
    {
      preValidation: emptyBodyIsObject,
      schema: {
        tags,
        summary: 'Mint a team API key; the key is shown once',
        security: SECURED,
        body: KeyCreateBody,
      },
    },
    async (req, reply) => {
      reply.code(201);
      return mintKey(ctx.db, req.caller, req.body.name);
    },
  );

  app.delete(
    '/v1/keys/:id',
    {
      schema: {
        tags,
        summary: 'Revoke a team API key',
        security: SECURED,
        params: IdParam('id', 'Key id (key_…)'),
      },
    },
    async (req) => {
      const out = await revokeKey(ctx.db, req.caller.teamId, req.params.id);
      // The key cache must not outlive a revocation, here or on the other replicas.
      ctx.auth.forgetKey(req.params.id);
      ctx.cluster.broadcast({ k: 'key', id: req.params.id });
      return out;
    },
  );
}
