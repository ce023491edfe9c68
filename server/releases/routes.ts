// GET /svcd, /svcd-linux-amd64, /svcd-linux-arm64: the sidecar binaries, streamed (auth none).
// GET /svc-linux-amd64, /svc-linux-arm64: the CLI as a single executable, the same way; under --dev
// with none built, the CLI as a script for Node >= 20 (dev-cli.ts).
// GET /install.sh: the install script the join-token command pipes to sh (spec "Install script").
import type { ReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Type } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import type { AppContext } from '../context.ts';
import { NotFound } from '../errors.ts';
import type { App } from '../http/app.ts';
import { DevCli } from './dev-cli.ts';
import { type Arch, archOf, buildName, openBuild, type Program } from './releases.ts';

function download(reply: FastifyReply, name: string, size: number, body: ReadStream | Buffer) {
  return reply
    .type('application/octet-stream')
    .header('content-length', String(size))
    .header('content-disposition', `attachment; filename="${name}"`)
    .send(body);
}

async function send(reply: FastifyReply, dir: string, arch: Arch, program: Program = 'svcd') {
  const build = await openBuild(dir, arch, program);
  return download(reply, build.name, build.size, build.stream);
}

const tags = ['releases'];

const INSTALL_SCRIPT = new URL('../../release/install.sh', import.meta.url);

/** The CLI build for `arch`, else (under --dev) the CLI bundled as a script; 404 when neither. */
async function sendCli(reply: FastifyReply, dir: string, arch: Arch, dev: DevCli | null) {
  try {
    return await send(reply, dir, arch, 'svc');
  } catch (err) {
    if (!dev || !(err instanceof NotFound)) throw err;
  }
  const script = await dev.script().catch((err: Error) => {
    throw new NotFound(
      `no CLI build ${buildName(arch, 'svc')} on this server, and none could be bundled: ${err.message}`,
    );
  });
  return download(reply, buildName(arch, 'svc'), script.length, script);
}

export function releaseRoutes(app: App, ctx: AppContext): void {
  const devCli = ctx.config.dev ? new DevCli(process.env.SVC_BUILD_VERSION || 'dev') : null;
  app.get(
    '/install.sh',
    { config: { auth: 'none' }, schema: { tags, summary: 'The sidecar install script (pipe to sudo sh)' } },
    async (_req, reply) =>
      reply.type('text/x-shellscript; charset=utf-8').send(await readFile(INSTALL_SCRIPT)),
  );
  app.get(
    '/svcd',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'Download the sidecar (amd64 unless arch=arm64)',
        querystring: Type.Object({
          arch: Type.Optional(
            Type.String({
              maxLength: 16,
              description: 'amd64 (default) or arm64; x86_64 and aarch64 also work',
            }),
          ),
        }),
      },
    },
    async (req, reply) => send(reply, ctx.config.releasesDir, archOf(req.query.arch)),
  );
  for (const arch of ['amd64', 'arm64'] as const) {
    app.get(
      `/svcd-linux-${arch}`,
      { config: { auth: 'none' }, schema: { tags, summary: `Download the linux/${arch} sidecar` } },
      async (_req, reply) => send(reply, ctx.config.releasesDir, arch),
    );
    app.get(
      `/svc-linux-${arch}`,
      { config: { auth: 'none' }, schema: { tags, summary: `Download the linux/${arch} svc CLI` } },
      async (_req, reply) => sendCli(reply, ctx.config.releasesDir, arch, devCli),
    );
  }
}
