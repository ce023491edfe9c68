// The device flow: POST /v1/device/code, /v1/device/approve, /v1/device/token. The user approves
// on the console's device page, <console>/app/device/ (the control plane's own /app/ when
// SVC_CONSOLE_URL is unset; server/console).
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SMALL_BODY_BYTES } from '../http/limits.ts';
import { Body, emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { DeviceFlow } from './device.ts';

const tags = ['device flow'];

export function deviceRoutes(app: App, ctx: AppContext): void {
  const { config } = ctx;
  const flow = new DeviceFlow(ctx.db, () => `${config.consoleUrl || config.publicUrl}/app/device/`);

  app.post(
    '/v1/device/code',
    {
      config: { auth: 'none' },
      bodyLimit: SMALL_BODY_BYTES,
      preValidation: emptyBodyIsObject,
      schema: { tags, summary: 'Start a CLI login', body: Body({}) },
    },
    async () => flow.start(),
  );

  app.post(
    '/v1/device/approve',
    {
      config: { auth: 'user' },
      schema: {
        tags,
        summary: 'Approve a CLI login for one of your teams (mints an API key)',
        security: SECURED,
        body: Body({
          user_code: Type.String({
            minLength: 1,
            maxLength: 32,
            description: 'XXXX-XXXX, as the CLI printed',
          }),
          team_id: Type.String({ minLength: 1, maxLength: 128 }),
          name: Type.Optional(Type.String({ maxLength: 100, description: 'Key name, default cli' })),
        }),
      },
    },
    async (req) => flow.approve(req.caller, req.body.user_code, req.body.team_id, req.body.name),
  );

  app.post(
    '/v1/device/token',
    {
      config: { auth: 'none' },
      bodyLimit: SMALL_BODY_BYTES,
      schema: {
        tags,
        summary: 'Poll for the approved API key (returned exactly once)',
        body: Body({ device_code: Type.String({ minLength: 1, maxLength: 256 }) }),
      },
    },
    async (req) => flow.token(req.body.device_code),
  );
}
