// A plain Node `http` client in a process of its own (so the server's event loop cannot order its
// reads): PUTs `count` bodies of `size` bytes, 1 MiB per write, to `url` and prints one JSON line
// per upload: `{status, body, error, errorBeforeAnswer}`.
// Usage: node test/support/upload-client.ts <url> <api key> <size> <count>
import { request } from 'node:http';

const [url, key, sizeArg, countArg] = process.argv.slice(2);
const MiB = 1024 * 1024;
const size = Number(sizeArg);

interface Outcome {
  status: number | null;
  body: string;
  error: string | null;
  errorBeforeAnswer: boolean;
}

function upload(): Promise<Outcome> {
  return new Promise((resolve) => {
    const out: Outcome = { status: null, body: '', error: null, errorBeforeAnswer: false };
    const req = request(url, {
      method: 'PUT',
      agent: false,
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/x-tar',
        'content-length': size,
      },
    });
    let answered = false;
    req.on('error', (err: NodeJS.ErrnoException) => {
      out.error ??= err.code ?? err.message;
      if (!answered) out.errorBeforeAnswer = true;
    });
    req.on('response', (res) => {
      out.status = res.statusCode ?? null;
      res.on('data', (c: Buffer) => {
        out.body += c.toString();
      });
      res.on('end', () => {
        answered = true;
      });
    });
    req.on('close', () => setTimeout(() => resolve(out), 20));
    const chunk = Buffer.alloc(MiB, 0x61);
    void (async () => {
      let left = size;
      while (left > 0 && !req.destroyed) {
        const part = left >= MiB ? chunk : chunk.subarray(0, left);
        left -= part.length;
        if (!req.write(part)) {
          await new Promise<void>((r) => {
            const go = () => {
              req.off('drain', go);
              req.off('close', go);
              r();
            };
            req.on('drain', go);
            req.on('close', go);
          });
        }
      }
      if (!req.destroyed) req.end();
    })();
  });
}

for (let i = 0; i < Number(countArg); i++) console.log(JSON.stringify(await upload()));
