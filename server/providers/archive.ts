// Hosted providers move one file at a time: an uploaded tar is split into its regular files, and a
// downloaded file is wrapped in a tar under its base name. Anything else in an archive is refused.
import { posix } from 'node:path';
import tar from 'tar-stream';

export async function regularFiles(
  archive: Buffer,
  provider: string,
): Promise<{ name: string; data: Buffer }[]> {
  return new Promise((resolve, reject) => {
    const out: { name: string; data: Buffer }[] = [];
    const ex = tar.extract();
    ex.on('entry', (h, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c) => chunks.push(c as Buffer));
      stream.on('end', () => {
        const name = posix.normalize(h.name).replace(/^\.?\/+/, '');
        if (h.type === 'file' && name && !name.startsWith('..'))
          out.push({ name, data: Buffer.concat(chunks) });
        else if (h.type !== 'directory') {
          ex.destroy(
            new Error(`${provider}: env.put: '${h.name}' is a ${h.type}; only regular files can be uploaded`),
          );
          return;
        }
        next();
      });
    });
    ex.on('finish', () => resolve(out));
    ex.on('error', reject);
    ex.end(archive);
  });
}

export async function fileArchive(path: string, data: Buffer): Promise<Buffer> {
  const pack = tar.pack();
  pack.entry({ name: posix.basename(path) || 'file', size: data.length, mode: 0o644 }, data);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}
