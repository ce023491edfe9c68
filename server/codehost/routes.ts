// The code-hosting routes. Sign-in (/auth/codehost/*), the webhook and deploy-from-source answer
// 503 while their credentials are unset; `/v1/codehost/*` report `configured: false` instead.
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import { NotConfigured } from '../errors.ts';
import type { App } from '../http/app.ts';
import { Body, emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { requireProject } from '../projects/projects.ts';
import {
  APP_UNAVAILABLE,
  installationsView,
  linkInstallation,
  reposView,
  requireApp,
  requireSignIn,
  SIGN_IN_UNAVAILABLE,
} from './codehost.ts';

const tags = ['code hosting'];
/** Spec "Limits": webhook bodies up to 2 MiB. */
export const WEBHOOK_BODY_LIMIT = 2 * 1024 * 1024;

export function codehostRoutes(app: App, ctx: AppContext): void {
  const { config, db } = ctx;

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
    async () => {
      requireSignIn(config);
      throw new NotConfigured(SIGN_IN_UNAVAILABLE);
    },
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
    async () => {
      requireSignIn(config);
      throw new NotConfigured(SIGN_IN_UNAVAILABLE);
    },
  );

  app.post(
    '/webhooks/codehost',
    {
      config: { auth: 'none' },
      bodyLimit: WEBHOOK_BODY_LIMIT,
      // Before the body is read: an unconfigured app answers 503 whatever was sent.
      onRequest: async () => requireApp(config),
      schema: { tags, summary: 'Code-hosting app webhook (push, installation, ping)' },
    },
    async () => {
      throw new NotConfigured(APP_UNAVAILABLE);
    },
  );

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
    async () => reposView(config),
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
    async (req) => {
      await requireProject(db, req.caller.teamId, req.params.project);
      requireApp(config);
      throw new NotConfigured(APP_UNAVAILABLE);
    },
  );
}
