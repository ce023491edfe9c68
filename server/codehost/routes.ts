// The code-hosting routes. Sign-in (/auth/codehost/*) and the app (webhook, /v1/codehost/*,
// deploy-from-source) each answer 503 while their credentials are unset.
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
  requireApp,
  requireSignIn,
  SIGN_IN_UNAVAILABLE,
} from './codehost.ts';

const tags = ['code hosting'];
/** Spec "Limits": webhook bodies up to 2 MiB. */
export const WEBHOOK_BODY_LIMIT = 2 * 1024 * 1024;

export function codehostRoutes(app: App, ctx: AppContext): void {
  const { config, db } = ctx;

  const signInRoute = { config: { auth: 'none' as const }, schema: { tags: ['sign-in'] } };
  app.get('/auth/codehost/start', signInRoute, async () => {
    requireSignIn(config);
    throw new NotConfigured(SIGN_IN_UNAVAILABLE);
  });
  app.get('/auth/codehost/callback', signInRoute, async () => {
    requireSignIn(config);
    throw new NotConfigured(SIGN_IN_UNAVAILABLE);
  });

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
    async () => {
      requireApp(config);
      throw new NotConfigured(APP_UNAVAILABLE);
    },
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
