// The time as ISO 8601 text, as every wire record and stored row writes it.

let isoMs = Number.NaN;
let iso = '';

/**
 * `new Date().toISOString()`, formatted once per millisecond: a command stamps the time four
 * times (row, frame, ack, finish), thousands of times a second on the exec hot path.
 */
export function isoNow(): string {
  const ms = Date.now();
  if (ms !== isoMs) {
    isoMs = ms;
    iso = new Date(ms).toISOString();
  }
  return iso;
}
