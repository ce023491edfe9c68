// The project context the CLI ships with a deploy: the compose file's directory as a tar.gz
// (honouring its .dockerignore; links stored as links, never followed; sockets and devices left
// out), written to a temporary file and streamed to PUT /v1/uploads. Shipped only when the compose
// file needs it: build:, env_file:, file secrets, relative binds, a .env, or verifier tests.
import {
  createReadStream,
  createWriteStream,
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { pack } from 'tar-stream';
import { compileIgnore } from '../protocol/dockerignore.ts';
import { CliError } from './errors.ts';
import type { Client } from './http.ts';

export const MAX_CONTEXT_BYTES = 512 * 1024 * 1024;
const MAX_ENTRIES = 100_000;

/** Whether the compose text reads files of its directory (a cheap textual test; the server decides). */
export function needsContext(compose: string, dir: string): boolean {
  if (existsSync(join(dir, '.env')) || existsSync(join(dir, 'Dockerfile'))) return true;
  return /^\s*(build|env_file|tests|file)\s*:/m.test(compose) || /(^|[\s"'[,=:])\.{1,2}\//m.test(compose);
}

interface Entry {
  name: string;
  path: string;
}

function listEntries(root: string, extra: Entry[] = []): Entry[] {
  const ignore = compileIgnore(
    existsSync(join(root, '.dockerignore')) ? readFileSync(join(root, '.dockerignore'), 'utf8') : '',
  );
  const out: Entry[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, path));
      if (ignore(path, st.isDirectory())) continue;
      if (out.length >= MAX_ENTRIES)
        throw new CliError(`${root} has more than ${MAX_ENTRIES} files: add a .dockerignore`);
      if (st.isDirectory()) {
        out.push({ name: path, path: join(root, path) });
        walk(path);
      } else if (st.isFile() || st.isSymbolicLink()) out.push({ name: path, path: join(root, path) });
    }
  };
  walk('');
  return [...out, ...extra];
}

/** Writes the context of `root` as tar.gz to a temporary file; returns it and a cleanup. */
export async function packContext(
  root: string,
  extra: Entry[] = [],
): Promise<{ file: string; done: () => void }> {
  const tmp = mkdtempSync(join(tmpdir(), 'svc-context-'));
  const file = join(tmp, 'context.tar.gz');
  const p = pack();
  const entries = listEntries(root, extra);
  const feed = async () => {
    let bytes = 0;
    for (const e of entries) {
      const st = lstatSync(e.path);
      const header = { name: e.name, mode: st.mode & 0o777, mtime: st.mtime };
      if (st.isDirectory()) p.entry({ ...header, type: 'directory' });
      else if (st.isSymbolicLink()) p.entry({ ...header, type: 'symlink', linkname: readlinkSync(e.path) });
      else {
        bytes += st.size;
        if (bytes > MAX_CONTEXT_BYTES)
          throw new CliError(`${root} is larger than 512 MiB: add a .dockerignore`);
        await new Promise<void>((resolve, reject) => {
          const sink = p.entry({ ...header, type: 'file', size: st.size }, (err) =>
            err ? reject(err) : resolve(),
          );
          createReadStream(e.path).on('error', reject).pipe(sink);
        });
      }
    }
    p.finalize();
  };
  const feeding = feed().catch((err) => p.destroy(err));
  await pipeline(p as unknown as Readable, createGzip(), createWriteStream(file));
  await feeding;
  return { file, done: () => rmSync(tmp, { recursive: true, force: true }) };
}

/** Packs and uploads `root`; returns the upload id. */
export async function uploadContext(client: Client, root: string, extra: Entry[] = []): Promise<string> {
  const { file, done } = await packContext(root, extra);
  try {
    const size = lstatSync(file).size;
    if (size > MAX_CONTEXT_BYTES)
      throw new CliError(`the context of ${root} is larger than 512 MiB compressed`);
    const r = await client.call('put', '/v1/uploads', {
      stream: {
        body: Readable.toWeb(createReadStream(file)) as ReadableStream,
        type: 'application/gzip',
        length: size,
      },
    });
    return r.upload;
  } finally {
    done();
  }
}
