// Routes that operate on environments: deploy, fork, snapshot, rollback, verify, destroy, exec
// and files. Each parses, calls one domain function and returns.
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { DeployBody, ExecBody, ForkBody, RollbackBody, VerifyBody } from '../../protocol/api/bodies.ts';
import { MAX_ARCHIVE_BYTES } from '../../protocol/commands.ts';
import type { AppContext } from '../context.ts';
import { BadRequest } from '../errors.ts';
import type { App } from '../http/app.ts';
import { emptyBodyIsObject, SECURED } from '../http/schema.ts';
import { forkEnvMany } from './fan-out.ts';
import { exec, getFiles, putFiles } from './io.ts';
import * as life from './lifecycle.ts';

const tags = ['environments'];
const EnvParams = Type.Object({ env: Type.String({ minLength: 1, maxLength: 100 }) });
const ProjectParams = Type.Object({ project: Type.String({ minLength: 1, maxLength: 200 }) });
const FilesQuery = Type.Object({
  service: Type.String({ minLength: 1, maxLength: 200 }),
  path: Type.String({ minLength: 1, maxLength: 4096 }),
});

export function envRoutes(app: App, ctx: AppContext): void {
  const { db, engine } = ctx;

  app.post(
    '/v1/projects/:project/deploy',
    {
      schema: {
        tags,
        summary: 'Deploy a compose file to an environment of the project (alpha unless named)',
        security: SECURED,
        params: ProjectParams,
        body: DeployBody,
      },
    },
    async (req, reply) =>
      reply
        .code(202)
        .send(await life.deploy(db, engine, req.caller, req.params.project, req.body, ctx.config.uploadsDir)),
  );

  app.post(
    '/v1/envs/:env/fork',
    {
      schema: {
        tags,
        summary: 'Fork the environment (its current or a named version) into a new one',
        security: SECURED,
        params: EnvParams,
        body: ForkBody,
      },
      // Spec: the body is optional; no body at all (no content-type either) means `{}`.
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) => {
      const { count } = req.body;
      return reply
        .code(202)
        .send(
          count === undefined
            ? await life.fork(db, engine, req.caller, req.params.env, req.body)
            : await forkEnvMany(db, engine, req.caller, req.params.env, { ...req.body, count }),
        );
    },
  );

  app.post(
    '/v1/envs/:env/snapshot',
    {
      schema: {
        tags,
        summary: 'Snapshot the environment into a new version',
        security: SECURED,
        params: EnvParams,
      },
    },
    async (req, reply) => reply.code(202).send(await life.snapshot(db, engine, req.caller, req.params.env)),
  );

  app.post(
    '/v1/envs/:env/rollback',
    {
      schema: {
        tags,
        summary: 'Roll the environment back to one of its versions',
        security: SECURED,
        params: EnvParams,
        body: RollbackBody,
      },
    },
    async (req, reply) =>
      reply.code(202).send(await life.rollback(db, engine, req.caller, req.params.env, req.body.version)),
  );

  app.post(
    '/v1/envs/:env/verify',
    {
      schema: {
        tags,
        summary: 'Grade the environment: collect the submission, run the verifier, record the reward',
        security: SECURED,
        params: EnvParams,
        body: VerifyBody,
      },
      preValidation: emptyBodyIsObject,
    },
    async (req, reply) =>
      reply
        .code(202)
        .send(
          await life.verify(db, engine, req.caller, req.params.env, req.body.resume ?? false, req.body.step),
        ),
  );

  app.delete(
    '/v1/envs/:env',
    { schema: { tags, summary: 'Destroy the environment', security: SECURED, params: EnvParams } },
    async (req, reply) => {
      const { deployment } = await life.destroy(db, engine, req.caller, req.params.env);
      return reply.code(202).send({ deployment });
    },
  );

  app.post(
    '/v1/envs/:env/exec',
    {
      schema: {
        tags,
        summary: 'Run a command in a service of the environment',
        security: SECURED,
        params: EnvParams,
        body: ExecBody,
      },
    },
    async (req) => exec(ctx, req.caller, req.params.env, req.body),
  );

  app.get(
    '/v1/envs/:env/files',
    {
      schema: {
        tags,
        summary: 'Download a file or directory of a service as a tar archive',
        security: SECURED,
        params: EnvParams,
        querystring: FilesQuery,
      },
    },
    async (req, reply) => {
      const tar = await getFiles(ctx, req.caller, req.params.env, req.query.service, req.query.path);
      return reply.type('application/x-tar').send(tar);
    },
  );

  app.register(async (plain) => {
    const scope = plain.withTypeProvider<TypeBoxTypeProvider>();
    // Archives are raw bytes; the route's limit is the spec's 32 MiB (413 above it). Any other
    // type is refused unread: the app's JSON and text parsers would buffer (and parse) a body of
    // any type up to that limit before the handler refused it.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      ['application/x-tar', 'application/octet-stream'],
      { parseAs: 'buffer', bodyLimit: MAX_ARCHIVE_BYTES },
      (_req, body, done) => done(null, body),
    );
    scope.addContentTypeParser('*', (req, _payload, done) =>
      done(
        new BadRequest(
          `send the tar archive as application/x-tar (got '${String(req.headers['content-type'] ?? '').slice(0, 100)}')`,
        ),
      ),
    );
    scope.put(
      '/v1/envs/:env/files',
      {
        bodyLimit: MAX_ARCHIVE_BYTES,
        schema: {
          tags,
          summary: 'Upload a tar archive into a service of the environment',
          security: SECURED,
          params: EnvParams,
          querystring: FilesQuery,
        },
      },
      async (req) => {
        if (!Buffer.isBuffer(req.body)) throw new BadRequest('send the tar archive as application/x-tar');
        return putFiles(ctx, req.caller, req.params.env, req.query.service, req.query.path, req.body);
      },
    );
  });
}
