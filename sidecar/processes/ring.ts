// A process's recent output, for replay to a follower that attaches late or again: chunks with
// their sequence numbers, at most `max` bytes (each chunk also counts a fixed overhead, so a
// million one-byte chunks cannot hold more memory than a few large ones). The oldest go first.

export interface Chunk {
  seq: number;
  kind: 'stdout' | 'stderr';
  data: Buffer;
}

/** What a chunk costs besides its bytes (object, array slot). */
const CHUNK_OVERHEAD = 64;

export class OutputRing {
  /** Dropped chunks leave `null` behind (up to the next compaction), never their data. */
  #chunks: (Chunk | null)[] = [];
  #head = 0;
  #bytes = 0;
  /** The highest sequence number the ring has dropped (0: none). */
  droppedTo = 0;
  readonly max: number;

  constructor(max: number) {
    this.max = max;
  }

  get bytes(): number {
    return this.#bytes;
  }

  push(c: Chunk): void {
    this.#chunks.push(c);
    this.#bytes += c.data.length + CHUNK_OVERHEAD;
    while (this.#bytes > this.max && this.#head < this.#chunks.length) {
      const old = this.#chunks[this.#head] as Chunk;
      // The slot lets go of the chunk now: until the next compaction (up to 1,024 drops later)
      // it would otherwise hold up to 1,024 frames of 64 KiB past the bound, per process.
      this.#chunks[this.#head++] = null;
      this.#bytes -= old.data.length + CHUNK_OVERHEAD;
      this.droppedTo = old.seq;
    }
    // Compact now and then rather than shifting on every drop.
    if (this.#head > 1024 && this.#head * 2 > this.#chunks.length) {
      this.#chunks = this.#chunks.slice(this.#head);
      this.#head = 0;
    }
  }

  /** The gap (if output after `since` was dropped) and the chunks after `since`, oldest first. */
  after(since: number): { gap: { from: number; to: number } | null; chunks: Chunk[] } {
    const gap = this.droppedTo > since ? { from: since + 1, to: this.droppedTo } : null;
    const chunks: Chunk[] = [];
    for (let i = this.#head; i < this.#chunks.length; i++) {
      const c = this.#chunks[i] as Chunk;
      if (c.seq > since) chunks.push(c);
    }
    return { gap, chunks };
  }

  /** Output bytes the ring still references, dropped chunks included (what it keeps from the GC). */
  get referencedBytes(): number {
    let n = 0;
    for (const c of this.#chunks) n += c?.data.length ?? 0;
    return n;
  }
}
