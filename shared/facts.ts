// Facts that never change once written (a host's team and kind, a version's service names), read
// once and kept, up to a bound past which all are dropped and read again. Because they never
// change, a kept fact is right in every process and every replica: nothing needs forgetting.
// One instance per owner in its application context, never module-level.

export class Facts<V> {
  readonly #kept = new Map<string, V>();
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
  }

  /** The kept fact of `key`, or what `read` finds (kept when found; `undefined` is not kept). */
  async get(key: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const known = this.#kept.get(key);
    if (known !== undefined) return known;
    const v = await read();
    if (v === undefined) return undefined;
    if (this.#kept.size >= this.#max) this.#kept.clear();
    this.#kept.set(key, v);
    return v;
  }
}
