// PUT /v1/uploads (key): a raw tar or tar.gz project context, streamed to disk (limit 512 MiB).
// 201 {upload, sha256, bytes}.

import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import { MAX_UPLOAD_BYTES } from './archive.ts';
import { createUpload } from './uploads.ts';

const UploadRecord = Type.Object({
  upload: Type.String({ description: 'Upload id (upl_…), the `context` of a deploy' }),
  sha256: Type.String({ description: 'sha256 of the uploaded bytes (the context digest)' }),
  bytes: Type.Integer(),
});

const TYPES = ['application/x-tar', 'application/gzip', 'application/x-gzip', 'application/octet-stream'];

export function uploadRoutes(app: App, ctx: AppContext): void {
  app.register(async (scope) => {
    // The body stays a stream: createUpload meters and hashes it on its way to disk.
    scope.addContentTypeParser(TYPES, (_req, payload, done) => done(null, payload));
    scope.put(
      '/v1/uploads',
      {
        bodyLimit: MAX_UPLOAD_BYTES + 1,
        schema: {
          summary: 'Upload a project context (raw tar or tar.gz, at most 512 MiB)',
          response: { 201: UploadRecord },
        },
      },
      async (req, reply) => {
        if (!(req.body instanceof Readable))
          throw new BadRequest('send the archive as application/x-tar or application/gzip');
        const up = await createUpload(ctx.db, ctx.config.uploadsDir, req.caller.teamId, req.body);
        return reply.code(201).send(up);
      },
    );
  });
}
