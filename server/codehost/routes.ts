// The code-hosting routes (spec "Code-hosting integration", "Sign-in"): routes parse, call one
// domain function and answer. Sign-in (/auth/codehost/*), the webhook and deploy-from-source answer
// 503 while their credentials are unset; `/v1/codehost/*` report `configured: false` instead.
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { Body, emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { installationsView, linkInstallation, reposView, requireApp } from './codehost.ts';
import { GitHub } from './github.ts';
import { finishSignIn, OAuthStates, startUrl } from './oauth.ts';
import { type CodehostDeps, deployFromSource } from './push.ts';
import { handleDelivery } from './webhooks.ts';

const tags = ['code hosting'];
/** Spec "Limits": webhook bodies up to 2 MiB. */
export const WEBHOOK_BODY_LIMIT = 2 * 1024 * 1024;

/** Each server's sign-in states (tests reach them to expire one). */
export const oauthStatesOf = new WeakMap<AppContext, OAuthStates>();

const header = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? ''));

export function codehostRoutes(app: App, ctx: AppContext): void {
  const { config, db } = ctx;
  const github = new GitHub(config.codehost.apiUrl, config.codehost.appId, config.codehost.appPrivateKey);
  const states = new OAuthStates();
  oauthStatesOf.set(ctx, states);
  const deps: CodehostDeps = { db, engine: ctx.engine, config, github, log: app.log };

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
    async (req, reply) => reply.redirect(startUrl(config, github, states, req.query.return), 302),
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
      const to = await finishSignIn(db, config, github, states, req.query);
      return reply.header('cache-control', 'no-store').redirect(to, 302);
    },
  );

  // The signature is over the raw bytes, so this route keeps the body as it came.
  app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    raw.post(
      '/webhooks/codehost',
      {
        config: none,
        bodyLimit: WEBHOOK_BODY_LIMIT,
        // Before the body is read: an unconfigured app answers 503 whatever was sent.
        onRequest: async () => requireApp(config),
        schema: { tags, summary: 'Code-hosting app webhook (push, installation, ping)' },
      },
      async (req) =>
        handleDelivery(deps, {
          event: header(req.headers['x-github-event']),
          id: header(req.headers['x-github-delivery']),
          signature: header(req.headers['x-hub-signature-256']),
          body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
        }),
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
        summary: 'Link an installation the app has reported to the team',
        security: SECURED,
        params: Type.Object({
          id: Type.String({ pattern: '^[0-9]{1,15}$', description: 'Installation id' }),
        }),
      },
    },
    async (req) => linkInstallation(db, config, req.caller.teamId, Number(req.params.id)),
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
        body: Body({
          branch: Type.Optional(Type.String({ maxLength: 255 })),
          env: Type.Optional(Type.String({ maxLength: 63 })),
        }),
      },
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) => {
      reply.code(202);
      return deployFromSource(deps, req.caller.teamId, req.params.project, req.body ?? {});
    },
  );
}
