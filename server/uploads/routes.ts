// PUT /v1/uploads (key): a raw tar or tar.gz project context, streamed to disk (limit 512 MiB,
// and the team's quota). 201 {upload, sha256, bytes}.
import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { AppContext } from '../context.ts';
import { BadRequest, SvcError } from '../errors.ts';
import type { App } from '../http/app.ts';
import { MAX_UPLOAD_BYTES } from './archive.ts';
import { createUpload } from './uploads.ts';

const UploadRecord = Type.Object({
  upload: Type.String({ description: 'Upload id (upl_…), the `context` of a deploy' }),
  sha256: Type.String({ description: 'sha256 of the uploaded bytes (the context digest)' }),
  bytes: Type.Integer(),
});

const TYPES = ['application/x-tar', 'application/gzip', 'application/x-gzip', 'application/octet-stream'];

/**
 * 415 for any other content type, before a byte of the body is read: a JSON or text body would
 * otherwise be buffered whole under this route's limit by the app's parsers.
 */
export function checkArchiveType(contentType: string | undefined): void {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (TYPES.includes(type)) return;
  throw new SvcError(
    415,
    `send the archive as ${TYPES.join(', ')} (got ${type ? `'${type.slice(0, 100)}'` : 'no content type'})`,
  );
}

export function uploadRoutes(app: App, ctx: AppContext): void {
  app.register(async (scope) => {
    // The body stays a stream: createUpload meters and hashes it on its way to disk. No other
    // parser is left in this scope, so no content type is ever buffered here.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(TYPES, (_req, payload, done) => done(null, payload));
    const limits = ctx.config.uploads;
    scope.put(
      '/v1/uploads',
      {
        bodyLimit: MAX_UPLOAD_BYTES + 1,
        // A large context on a slow link: cut when it stalls, not at the request timeout.
        config: { slowBody: true },
        // After authentication (an app-wide hook), before the body is read.
        preParsing: (req, _reply, payload, done) => {
          try {
            checkArchiveType(req.headers['content-type']);
            done(null, payload);
          } catch (err) {
            done(err as Error);
          }
        },
        schema: {
          summary: 'Upload a project context (raw tar or tar.gz, at most 512 MiB, within the team quota)',
          response: { 201: UploadRecord },
        },
      },
      async (req, reply) => {
        if (!(req.body instanceof Readable))
          throw new BadRequest('send the archive as application/x-tar or application/gzip');
        const length = req.headers['content-length'];
        const declared = length !== undefined && /^\d{1,15}$/.test(length) ? Number(length) : undefined;
        const up = await createUpload(ctx.db, ctx.config.uploadsDir, req.caller.teamId, req.body, {
          limits,
          declared,
          complete: () => req.raw.complete,
        });
        return reply.code(201).send(up);
      },
    );
  });
}
