// The file API of an environment's services (README "Files"): GET/PUT/DELETE /v1/envs/{env}/fs
// for one file's bytes, and fs/stat, fs/list, fs/move, fs/mkdir, fs/watch. Each route parses,
// calls one function of fs.ts and answers. Bodies and answers are records of protocol/api.ts.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { FsListQuery, FsMkdirBody, FsMoveBody, FsQuery, FsWriteQuery } from '../../protocol/api.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import * as fs from './fs.ts';

const tags = ['files'];
const params = Type.Object({ env: Type.String({ minLength: 1, maxLength: 100 }) });

export function fsRoutes(app: App, ctx: AppContext): void {
  app.get(
    '/v1/envs/:env/fs',
    {
      // A HEAD would start a transfer nobody reads.
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Read one regular file of a service (its raw bytes, streamed; 404 when missing)',
        security: SECURED,
        params,
        querystring: FsQuery,
      },
    },
    async (req, reply) => {
      const { body, size } = await fs.read(ctx, req.caller, req.params.env, req.query);
      reply.raw.once('close', () => body.destroy());
      return reply.header('content-length', size).type('application/octet-stream').send(body);
    },
  );

  app.delete(
    '/v1/envs/:env/fs',
    {
      schema: {
        tags,
        summary: 'Remove a file, link or directory (recursively) of a service',
        security: SECURED,
        params,
        querystring: FsQuery,
      },
    },
    async (req, reply) => {
      await fs.remove(ctx, req.caller, req.params.env, req.query);
      return reply.code(204).send();
    },
  );

  app.get(
    '/v1/envs/:env/fs/stat',
    {
      schema: {
        tags,
        summary: 'One entry of a service (a link is described, not followed)',
        security: SECURED,
        params,
        querystring: FsQuery,
      },
    },
    async (req) => fs.stat(ctx, req.caller, req.params.env, req.query),
  );

  app.get(
    '/v1/envs/:env/fs/list',
    {
      schema: {
        tags,
        summary: 'The entries under a directory of a service, down to depth levels',
        security: SECURED,
        params,
        querystring: FsListQuery,
      },
    },
    async (req) => fs.list(ctx, req.caller, req.params.env, req.query),
  );

  app.post(
    '/v1/envs/:env/fs/move',
    { schema: { tags, summary: 'Rename a path of a service', security: SECURED, params, body: FsMoveBody } },
    async (req, reply) => {
      await fs.move(ctx, req.caller, req.params.env, req.body);
      return reply.code(204).send();
    },
  );

  app.post(
    '/v1/envs/:env/fs/mkdir',
    {
      schema: {
        tags,
        summary: "Create a directory and its missing parents, owned by the service's user",
        security: SECURED,
        params,
        body: FsMkdirBody,
      },
    },
    async (req, reply) => reply.code(201).send(await fs.mkdir(ctx, req.caller, req.params.env, req.body)),
  );

  app.get(
    '/v1/envs/:env/fs/watch',
    {
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: 'Changes in a directory of a service as Server-Sent Events',
        description:
          'text/event-stream. Each `data:` is {type: create|write|remove|rename|gap|end, path?, from?, dropped?, reason?}; comment lines are heartbeats.',
        security: SECURED,
        params,
        querystring: FsQuery,
      },
    },
    async (req, reply) => {
      const out = fs.sseOf(await fs.watch(ctx, req.caller, req.params.env, req.query));
      reply.raw.once('close', () => out.destroy());
      reply
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        .type('text/event-stream; charset=utf-8');
      return reply.send(out);
    },
  );

  app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    // The body is the file, of any type, streamed to the host as it arrives (never buffered here).
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    scope.put(
      '/v1/envs/:env/fs',
      {
        config: { slowBody: true },
        schema: {
          tags,
          summary:
            "Write one file of a service atomically, owned by the service's user (raw body, Content-Length required)",
          security: SECURED,
          params,
          querystring: FsWriteQuery,
        },
      },
      async (req, reply) => {
        const length = req.headers['content-length'];
        const declared = length !== undefined && /^\d{1,15}$/.test(length) ? Number(length) : undefined;
        const r = await fs.write(ctx, req.caller, req.params.env, req.query, req.raw, declared);
        return reply.code(201).send(r);
      },
    );
  });
}
