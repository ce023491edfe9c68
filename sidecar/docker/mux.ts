// Docker's multiplexed stream format (non-TTY exec and logs): frames of an 8-byte header
// [stream type, 0, 0, 0, uint32 big-endian length] then the payload. Type 1 is stdout, 2 stderr.

/** Keeps the last `max` bytes written; counts what it dropped so the text can say so. */
export class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  dropped = 0;
  readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length) {
      const over = this.size - this.max;
      const first = this.chunks[0];
      if (first.length <= over) {
        this.chunks.shift();
        this.size -= first.length;
        this.dropped += first.length;
      } else {
        this.chunks[0] = first.subarray(over);
        this.size -= over;
        this.dropped += over;
      }
    }
  }
  text(): string {
    const body = Buffer.concat(this.chunks).toString('utf8');
    return this.dropped ? `[${this.dropped} earlier bytes dropped]\n${body}` : body;
  }
}

/** Incremental demultiplexer: feed it raw chunks, it calls `out(type, payload)` per frame piece. */
export class Demuxer {
  private header = Buffer.alloc(0);
  private remaining = 0;
  private type = 0;
  private readonly out: (type: number, payload: Buffer) => void;
  constructor(out: (type: number, payload: Buffer) => void) {
    this.out = out;
  }
  write(chunk: Buffer): void {
    let buf = chunk;
    while (buf.length) {
      if (this.remaining === 0) {
        const need = 8 - this.header.length;
        this.header = Buffer.concat([this.header, buf.subarray(0, need)]);
        buf = buf.subarray(need);
        if (this.header.length < 8) return;
        this.type = this.header[0];
        this.remaining = this.header.readUInt32BE(4);
        this.header = Buffer.alloc(0);
        continue;
      }
      const piece = buf.subarray(0, this.remaining);
      buf = buf.subarray(piece.length);
      this.remaining -= piece.length;
      this.out(this.type, piece);
    }
  }
}

/** Splits a complete multiplexed buffer (a logs response) into stdout and stderr text. */
export function demuxAll(raw: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  new Demuxer((type, payload) => (type === 2 ? err : out).push(payload)).write(raw);
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}
