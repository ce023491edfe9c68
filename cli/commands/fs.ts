// `fs ls|cat|put|rm`: single files of a service through the file API (GET/PUT/DELETE
// /v1/envs/{env}/fs and fs/list). `cat` streams the file to stdout as it arrives; `put` streams the
// local file from the descriptor it checked, so what is sent is what was checked.
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { ApiAnswer } from '../api-types.ts';
import type { Command } from '../command.ts';
import { CliError, UsageError } from '../errors.ts';
import { JSON_FLAG, SERVICE_OPTIONAL, serviceOf } from './processes.ts';

type FsEntryRecord = ApiAnswer<'get', '/v1/envs/{env}/fs/list'>['entries'][number];

/** `fs ls`'s table: type, permission bits in octal, size, mtime and path (a link shows its target length). */
export function entryTable(entries: FsEntryRecord[]): string {
  const rows = entries.map((e) => [
    e.type,
    (e.mode & 0o7777).toString(8).padStart(4, '0'),
    String(e.size),
    e.mtime.replace(/\.\d+Z$/, 'Z'),
    e.type === 'dir' ? `${e.path}/` : e.path,
  ]);
  const head = ['TYPE', 'MODE', 'SIZE', 'MTIME', 'PATH'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === 2 ? c.padStart(widths[i]) : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return `${[head, ...rows].map(line).join('\n')}\n`;
}

export const fsLs: Command = {
  words: ['fs', 'ls'],
  summary: 'List a directory of a service (GET /v1/envs/{env}/fs/list)',
  details: 'Entries below <path> down to --depth levels (1-16); a link is listed, not followed.',
  flags: [
    SERVICE_OPTIONAL,
    { name: 'depth', type: 'string', value: 'N', default: '1', help: 'Levels below the path (1-16)' },
    JSON_FLAG,
  ],
  positionals: [{ name: 'env' }, { name: 'path', optional: true }],
  async run(ctx) {
    const [env, path = '/'] = ctx.args;
    const depth = String(ctx.flags.depth);
    if (!/^([1-9]|1[0-6])$/.test(depth))
      throw new UsageError('--depth takes a whole number from 1 to 16', fsLs);
    const service = await serviceOf(ctx, env);
    const r = await ctx.client().call('get', '/v1/envs/{env}/fs/list', {
      path: { env },
      query: { service, path, depth },
    });
    if (ctx.flags.json === true) ctx.io.json(r);
    else ctx.io.out(r.entries.length ? entryTable(r.entries) : `${path} is empty\n`);
    if (r.truncated && ctx.flags.json !== true)
      ctx.io.err(`note: more entries than the server lists at once; list a deeper path\n`);
    return 0;
  },
};

export const fsCat: Command = {
  words: ['fs', 'cat'],
  summary: 'Write a file of a service to stdout, streamed (GET /v1/envs/{env}/fs)',
  flags: [SERVICE_OPTIONAL],
  positionals: [{ name: 'env' }, { name: 'path' }],
  async run(ctx) {
    const [env, path] = ctx.args;
    const service = await serviceOf(ctx, env);
    const body = await ctx
      .client()
      .download('/v1/envs/{env}/fs', { path: { env }, query: { service, path } });
    for await (const chunk of body) {
      if (!process.stdout.write(chunk)) await new Promise((r) => process.stdout.once('drain', r));
    }
    return 0;
  },
};

export const fsPut: Command = {
  words: ['fs', 'put'],
  summary:
    "Write a local file to a path of a service, atomically, as the service's user (PUT /v1/envs/{env}/fs)",
  details: 'The file is streamed (not read into memory); prints {path, size}.',
  flags: [
    SERVICE_OPTIONAL,
    { name: 'mode', type: 'string', value: 'MODE', help: 'Octal permission bits (server default 644)' },
  ],
  positionals: [{ name: 'env' }, { name: 'local file' }, { name: 'remote path' }],
  async run(ctx) {
    const [env, local, remote] = ctx.args;
    const mode = ctx.flags.mode === undefined ? undefined : String(ctx.flags.mode);
    if (mode !== undefined && !/^[0-7]{3,4}$/.test(mode))
      throw new UsageError('--mode takes octal permission bits, e.g. 644 or 0755', fsPut);
    let file: Awaited<ReturnType<typeof open>>;
    try {
      file = await open(local, constants.O_RDONLY | constants.O_NONBLOCK);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new CliError(
        `cannot read ${local}: ${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)}`,
      );
    }
    try {
      const st = await file.stat();
      if (!st.isFile()) throw new CliError(`cannot send ${local}: not a regular file`);
      const service = await serviceOf(ctx, env);
      const query = { service, path: remote, mode };
      const type = 'application/octet-stream';
      // Exactly the size that was checked is sent, even if the file grows meanwhile.
      const opts =
        st.size === 0
          ? { raw: { data: new Uint8Array(), type } }
          : {
              stream: {
                body: Readable.toWeb(file.createReadStream({ start: 0, end: st.size - 1, autoClose: false })),
                type,
                length: st.size,
              },
            };
      ctx.io.json(await ctx.client().call('put', '/v1/envs/{env}/fs', { path: { env }, query, ...opts }));
    } finally {
      await file.close();
    }
    return 0;
  },
};

export const fsRm: Command = {
  words: ['fs', 'rm'],
  summary: 'Remove a file, link or directory (recursively) of a service (DELETE /v1/envs/{env}/fs)',
  flags: [SERVICE_OPTIONAL],
  positionals: [{ name: 'env' }, { name: 'path' }],
  async run(ctx) {
    const [env, path] = ctx.args;
    const service = await serviceOf(ctx, env);
    await ctx.client().call('delete', '/v1/envs/{env}/fs', { path: { env }, query: { service, path } });
    return 0;
  },
};
