// The device flow: POST /v1/device/code, /v1/device/approve, /v1/device/token. The user approves
// on the console's device page, <console>/app/device/ (the control plane's own /app/ when
// SVC_CONSOLE_URL is unset; server/console).

import { DeviceApproveBody, DeviceCodeBody, DeviceTokenRequestBody } from '../../protocol/api/bodies.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SMALL_BODY_BYTES } from '../http/limits.ts';
import { emptyBodyIsObject, SECURED } from '../http/schema.ts';
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
      schema: { tags, summary: 'Start a CLI login', body: DeviceCodeBody },
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
        body: DeviceApproveBody,
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
        body: DeviceTokenRequestBody,
      },
    },
    async (req) => flow.token(req.body.device_code),
  );
}
