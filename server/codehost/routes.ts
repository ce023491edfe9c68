// The code-hosting routes (spec "Code-hosting integration", "Sign-in"): routes parse, call one
// domain function and answer. Sign-in (/auth/codehost/*), the webhook and deploy-from-source answer
// 503 while their credentials are unset; `/v1/codehost/*` report `configured: false` instead.

import { Type } from '@sinclair/typebox';
import { DeployFromSourceBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import { WEBHOOK_PATH } from '../http/rate-limits.ts';
import { emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { installationsView, linkInstallation, reposView } from './codehost.ts';
import { GitHub } from './github.ts';
import { finishSignIn, startUrl } from './oauth.ts';
import { type CodehostDeps, deployFromSource } from './push.ts';
import { UserTokens } from './user-token.ts';
import { checkWebhookHeaders, readSigned, WEBHOOK_BODY_LIMIT, webhookSecret } from './webhook-intake.ts';
import { handleDelivery } from './webhooks.ts';

const tags = ['code hosting'];

export function codehostRoutes(app: App, ctx: AppContext): void {
  const { config, db } = ctx;
  const github = new GitHub(config.codehost.apiUrl, config.codehost.appId, config.codehost.appPrivateKey);
  const { oauthStates: states } = ctx;
  const deps: CodehostDeps = { db, engine: ctx.engine, events: ctx.events, config, github, log: app.log };
  const tokens = new UserTokens({ db, config, github, secrets: ctx.secrets });

  const none = { auth: 'none' as const };
  const signIn = ['sign-in'];
  app.get(
    '/auth/codehost/start',
    {
      config: none,
      schema: {
        tags: signIn,
        summary: 'Start console sign-in at the code host',
        querystring: Type.Object({
          return: Type.Optional(
            Type.String({
              maxLength: 2048,
              description: 'Where to go after sign-in: the console or a loopback URL',
            }),
          ),
        }),
      },
    },
    async (req, reply) => reply.redirect(await startUrl(config, github, states, req.query.return), 302),
  );
  app.get(
    '/auth/codehost/callback',
    {
      config: none,
      schema: {
        tags: signIn,
        summary: "The code host's redirect target; ends at <return>#token=<session>",
        querystring: Type.Object({
          code: Type.Optional(Type.String({ maxLength: 512 })),
          state: Type.Optional(Type.String({ maxLength: 512 })),
        }),
      },
    },
    async (req, reply) => {
      const to = await finishSignIn(db, config, github, states, tokens, req.query);
      return reply.header('cache-control', 'no-store').redirect(to, 302);
    },
  );

  // Refusals that need no body come first (onRequest, before a byte is read); the body is then
  // read and its signature checked in one pass (webhook-intake.ts), and only a signed body parsed.
  const { webhookIntake: intake } = ctx;
  app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('application/json', (req, body, done) => {
      let read: Promise<Buffer>;
      try {
        const { signature } = checkWebhookHeaders(config, req.headers);
        read = readSigned(body, webhookSecret(config), signature, { timeoutMs: intake.readMs });
      } catch (err) {
        return done(err as Error);
      }
      read.then((b) => done(null, b), done);
    });
    raw.post(
      WEBHOOK_PATH,
      {
        config: none,
        bodyLimit: WEBHOOK_BODY_LIMIT,
        onRequest: async (req, reply) => {
          checkWebhookHeaders(config, req.headers);
          // Released when the answer is done or the connection goes, whichever comes first.
          reply.raw.once('close', intake.take(req.ip));
        },
        schema: { tags, summary: 'Code-hosting app webhook (push, installation, ping)' },
      },
      async (req) => {
        const h = checkWebhookHeaders(config, req.headers);
        // Only the parser above makes a body, and only a signed one.
        if (!Buffer.isBuffer(req.body)) throw new BadRequest('webhook without a signed body');
        return handleDelivery(deps, { event: h.event, id: h.id, body: req.body });
      },
    );
  });

  app.get(
    '/v1/codehost/installations',
    { schema: { tags, summary: "The team's code-hosting installations", security: SECURED } },
    async (req) => installationsView(db, config, req.caller.teamId),
  );

  app.post(
    '/v1/codehost/installations/:id/link',
    {
      schema: {
        tags,
        summary: 'Link an installation the signed-in user can see on the code host to the team',
        security: SECURED,
        params: Type.Object({
          id: Type.String({ pattern: '^[0-9]{1,15}$', description: 'Installation id' }),
        }),
      },
    },
    async (req) => linkInstallation(db, config, tokens, req.caller, Number(req.params.id)),
  );

  app.get(
    '/v1/codehost/repos',
    {
      schema: {
        tags,
        summary: 'Repositories an installation can see',
        security: SECURED,
        querystring: Type.Object({ installation: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$' })) }),
      },
    },
    async (req) =>
      reposView(
        db,
        config,
        github,
        req.caller.teamId,
        req.query.installation === undefined ? undefined : Number(req.query.installation),
      ),
  );

  app.post(
    '/v1/projects/:project/deploy-from-source',
    {
      schema: {
        tags,
        summary: "Deploy the project's repository at a branch",
        security: SECURED,
        params: Type.Object({ project: Type.String({ minLength: 1, maxLength: 128 }) }),
        body: DeployFromSourceBody,
      },
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) => {
      reply.code(202);
      return deployFromSource(deps, req.caller.teamId, req.params.project, req.body ?? {});
    },
  );
}
