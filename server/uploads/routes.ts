// PUT /v1/uploads (key): a raw tar or tar.gz project context, streamed to disk (limit 512 MiB).
// 201 {upload, sha256, bytes}.
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { MAX_UPLOAD_BYTES } from './archive.ts';
import { createUpload } from './uploads.ts';

const TYPES = ['application/x-tar', 'application/gzip', 'application/x-gzip', 'application/octet-stream'];

export function uploadRoutes(app: App, ctx: AppContext): void {
  app.register(async (scope) => {
    // The body stays a stream: createUpload meters and hashes it on its way to disk.
    scope.addContentTypeParser(TYPES, (_req, payload, done) => done(null, payload));
    scope.put(
      '/v1/uploads',
      { bodyLimit: MAX_UPLOAD_BYTES + 1, schema: { hide: false } },
      async (req, reply) => {
        const up = await createUpload(ctx.db, ctx.config.uploadsDir, req.caller.teamId, req.body as never);
        return reply.code(201).send(up);
      },
    );
  });
}
