// `files put|get` (tar archives in and out of a service) and `exec` (a command in a service).
import type { Command } from '../command.ts';
import { UsageError } from '../errors.ts';
import { extractSafely, packPath } from '../tarball.ts';
import { runLive } from './processes.ts';

const SERVICE = {
  name: 'service',
  type: 'string',
  value: 'S',
  required: true,
  help: 'Service name (required)',
} as const;

export const filesPut: Command = {
  words: ['files', 'put'],
  summary: 'Upload a local file or directory into a directory of a service (at most 32 MiB as a tar)',
  details: 'The archive holds the local path under its base name; entries are owned by root.',
  flags: [SERVICE],
  positionals: [{ name: 'env' }, { name: 'local path' }, { name: 'container dir' }],
  async run(ctx) {
    const [env, local, dir] = ctx.args;
    const packed = await packPath(local);
    for (const s of packed.skipped) ctx.io.err(`note: skipped ${s}\n`);
    const r = await ctx.client().call('put', '/v1/envs/{env}/files', {
      path: { env },
      query: { service: ctx.flags.service as string, path: dir },
      raw: { data: packed.data, type: 'application/x-tar' },
    });
    ctx.io.json(r);
    return 0;
  },
};

export const filesGet: Command = {
  words: ['files', 'get'],
  summary: 'Download a path from a service and extract it under a local directory',
  details:
    'Writes only regular files and directories, only inside <local dir>. Links are skipped (and\n' +
    'listed); absolute paths, .. and device or fifo entries refuse the archive, writing nothing.',
  flags: [SERVICE],
  positionals: [{ name: 'env' }, { name: 'container path' }, { name: 'local dir' }],
  async run(ctx) {
    const [env, path, dir] = ctx.args;
    const r = await ctx.client().send('get', '/v1/envs/{env}/files', {
      path: { env },
      query: { service: ctx.flags.service as string, path },
    });
    const result = await extractSafely(r.bytes, dir);
    for (const s of result.skipped) ctx.io.err(`note: skipped ${s}\n`);
    ctx.io.out(`${result.files} files written under ${dir}\n`);
    return 0;
  },
};

export const exec: Command = {
  words: ['exec'],
  usage: 'exec --service S [-i] [-t] <env> [--] <cmd...>',
  summary: 'Run a command in a service and print {exit_code, stdout, stderr}; -i/-t attach to it',
  details:
    'A non-zero exit code of the command is printed, not an error of svc (exit 0).\n' +
    'With -i (stdin forwarded) or -t (a terminal, as svc shell) the command runs as a live process:\n' +
    'its output is streamed as it comes, and svc exits with its exit code (128+n for signal n).',
  flags: [
    SERVICE,
    {
      name: 'interactive',
      short: 'i',
      type: 'boolean',
      help: 'Forward stdin to the command (EOF closes its stdin)',
    },
    { name: 'tty', short: 't', type: 'boolean', help: 'Give the command a terminal of the local size' },
  ],
  positionals: [{ name: 'env' }, { name: 'cmd', variadic: true }],
  async run(ctx) {
    const [env, ...rest] = ctx.args;
    const cmd = rest[0] === '--' ? rest.slice(1) : rest;
    if (cmd.length === 0) throw new UsageError('missing <cmd...>', exec);
    const service = ctx.flags.service as string;
    const stdin = ctx.flags.interactive === true;
    const tty = ctx.flags.tty === true;
    if (stdin || tty) return runLive(ctx, env, { service, cmd, stdin, tty });
    const r = await ctx
      .client()
      .call('post', '/v1/envs/{env}/exec', { path: { env }, json: { service, cmd } });
    ctx.io.json(r);
    return 0;
  },
};
