// Tar archives for file-transfer tests: build one from names and contents, and read one back.
import tar from 'tar-stream';

export async function tarOf(files: Record<string, Buffer | string>): Promise<Buffer> {
  const pack = tar.pack();
  for (const [name, body] of Object.entries(files)) pack.entry({ name }, body);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

export async function untar(data: Buffer): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const ex = tar.extract();
  ex.on('entry', (h, s, next) => {
    const chunks: Buffer[] = [];
    s.on('data', (c) => chunks.push(c as Buffer));
    s.on('end', () => {
      out[h.name] = Buffer.concat(chunks).toString();
      next();
    });
  });
  await new Promise((resolve, reject) => {
    ex.on('finish', () => resolve(null));
    ex.on('error', reject);
    ex.end(data);
  });
  return out;
}
