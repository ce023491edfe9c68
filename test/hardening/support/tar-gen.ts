// Hostile tar archives for the fuzz suites, built block by block so that anything a header can
// say is reachable: traversal and absolute names, NUL bytes, every type flag (links, devices,
// fifos, GNU long names, pax headers), declared sizes that lie, huge headers, truncation and
// flipped bytes.
import fc from 'fast-check';

const BLOCK = 512;

function octal(n: number, width: number): string {
  return `${n
    .toString(8)
    .padStart(width - 1, '0')
    .slice(-(width - 1))}\0`;
}

export interface RawEntry {
  name: string;
  type: string;
  size: number;
  /** Bytes actually written after the header (may differ from `size`). */
  body: number;
  linkname: string;
  prefix: string;
}

export function header(e: RawEntry): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(e.name, 0, 100, 'utf8');
  h.write(octal(0o644, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(e.size >= 8 ** 11 ? '77777777777\0' : octal(e.size, 12), 124, 'ascii');
  h.write(octal(0, 12), 136, 'ascii');
  h.write('        ', 148, 'ascii');
  h.write(e.type, 156, 1, 'latin1');
  h.write(e.linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write(e.prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h) sum += b;
  h.write(octal(sum, 7), 148, 'ascii');
  return h;
}

export function archive(entries: RawEntry[], end: boolean): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    parts.push(header(e));
    const body = Buffer.alloc(Math.ceil(e.body / BLOCK) * BLOCK, 0x61);
    parts.push(body);
  }
  if (end) parts.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(parts);
}

const NAMES = [
  '../escape.txt',
  '../../../../tmp/svc-fuzz-escape',
  '/etc/passwd',
  '/abs',
  'a/../../b',
  'ok.txt',
  'dir/',
  'dir/file',
  'nul\0name',
  '.',
  '',
  'x'.repeat(99),
  './a/./b',
  'link',
  'link/through',
];

export const rawEntry: fc.Arbitrary<RawEntry> = fc.record({
  name: fc.oneof(fc.constantFrom(...NAMES), fc.string({ maxLength: 120 })),
  type: fc.constantFrom('0', '\0', '1', '2', '3', '4', '5', '6', '7', 'L', 'K', 'x', 'g', 'S', 'Z', 'V'),
  size: fc.oneof(
    fc.integer({ min: 0, max: 4096 }),
    fc.constant(8 ** 11),
    fc.integer({ min: 0, max: 2 ** 33 }),
  ),
  body: fc.integer({ min: 0, max: 4096 }),
  linkname: fc.constantFrom('', '../../etc/passwd', '/etc/shadow', 'ok.txt', 'link', '.'),
  prefix: fc.constantFrom('', '..', '/tmp', 'a'.repeat(154)),
});

/** An archive and a way to spoil it: cut short, bytes flipped, or left as built. */
export const hostileTar: fc.Arbitrary<Buffer> = fc
  .record({
    entries: fc.array(rawEntry, { minLength: 1, maxLength: 6 }),
    end: fc.boolean(),
    cut: fc.option(fc.integer({ min: 0, max: 8192 })),
    flips: fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
    garbage: fc.option(fc.uint8Array({ maxLength: 2048 })),
  })
  .map(({ entries, end, cut, flips, garbage }) => {
    if (garbage) return Buffer.from(garbage);
    let data = archive(entries, end);
    if (cut !== null) data = data.subarray(0, Math.min(cut, data.length));
    for (const [at, byte] of flips) if (data.length) data[at % data.length] = byte;
    return data;
  });
