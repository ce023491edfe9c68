// The data both fork benchmarks clone: many small files plus one large file.
import { randomFillSync } from 'node:crypto';
import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';

export const SMALL_FILES = 256;
const SMALL_FILE_BYTES = 4096;

export /** 256 files of 4 KiB in 16 directories, and one file holding the rest of `mb` megabytes. */
async function writeVolume(dir: string, mb: number): Promise<void> {
  const small = Buffer.alloc(SMALL_FILE_BYTES);
  for (let i = 0; i < SMALL_FILES; i++) {
    const sub = join(dir, `d${i % 16}`);
    await mkdir(sub, { recursive: true });
    const fh = await open(join(sub, `f${i}`), 'w');
    await fh.write(randomFillSync(small));
    await fh.close();
  }
  const fh = await open(join(dir, 'large.bin'), 'w');
  const chunk = Buffer.alloc(1024 * 1024);
  let left = mb * 1024 * 1024 - SMALL_FILES * SMALL_FILE_BYTES;
  while (left > 0) {
    const n = Math.min(left, chunk.length);
    await fh.write(randomFillSync(chunk), 0, n);
    left -= n;
  }
  await fh.sync();
  await fh.close();
}
