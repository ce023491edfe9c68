// Bounds on what a client can make the HTTP server hold: timeouts on
// every connection, a connection cap, small bodies where a route needs none, a JSON nesting
// bound checked before parsing, no NUL in any text, and request rates. Defaults are for
// production; tests and benchmarks override single fields through StartOptions.limits.
import { readFileSync } from 'node:fs';

export interface HttpLimits {
  /** Whole request (headers and body) must arrive within this; answers are not limited. */
  requestTimeoutMs: number;
  /**
   * A streamed upload's body (a route with `config.slowBody`) is cut after this long without a
   * byte, and after `uploadTimeoutMs` in all: an honest slow link is not cut at `requestTimeoutMs`.
   */
  uploadIdleTimeoutMs: number;
  uploadTimeoutMs: number;
  headersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** Open connections (HTTP and host streams); more are dropped on accept. */
  maxConnections: number;
  /** Arrays and objects nested deeper than this are refused before JSON.parse runs. */
  jsonDepth: number;
  /** Requests per minute per client address to routes that need no credential (0: off). */
  anonPerMinute: number;
  /** Webhook deliveries per minute per client address (0: off). */
  webhooksPerMinute: number;
  /** Failed authentications per minute per client address before 429 (0: off). */
  authFailuresPerMinute: number;
  /** Requests per minute per API key or session (0: off). */
  perCredentialPerMinute: number;
  /** Bytes of a refused body read and discarded before the connection is cut (drain.ts). */
  drainMaxBytes: number;
  /** Longest a refused body is read before the connection is cut (nginx's `lingering_time`). */
  drainMaxMs: number;
}

/** The soft limit on open files, so the connection cap leaves room for the database and files. */
function openFilesLimit(): number {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = Number(line?.split(/\s+/)[3]);
    return Number.isFinite(soft) && soft > 0 ? soft : 1024;
  } catch {
    return 1024;
  }
}

/**
 * Routes without a credential that take at most a code or an email: a larger body there is only
 * memory an anonymous client makes the server hold.
 */
export const SMALL_BODY_BYTES = 4096;

export const DEFAULT_LIMITS: HttpLimits = {
  requestTimeoutMs: 120_000,
  uploadIdleTimeoutMs: 60_000,
  // 512 MiB at 64 KiB/s takes 2 h 20 min.
  uploadTimeoutMs: 4 * 3600_000,
  headersTimeoutMs: 15_000,
  keepAliveTimeoutMs: 30_000,
  maxConnections: Math.max(64, Math.min(16_384, openFilesLimit() - 256)),
  jsonDepth: 64,
  anonPerMinute: 120,
  // The code host delivers from a few shared addresses: room for a busy organisation's pushes.
  webhooksPerMinute: 600,
  authFailuresPerMinute: 60,
  perCredentialPerMinute: 60_000,
  drainMaxBytes: 64 * 1024 * 1024,
  drainMaxMs: 30_000,
};

/** Benchmarks drive one key and one address far past any client's rate. */
export const NO_RATE_LIMITS: Partial<HttpLimits> = {
  anonPerMinute: 0,
  webhooksPerMinute: 0,
  authFailuresPerMinute: 0,
  perCredentialPerMinute: 0,
};

export function httpLimits(overrides: Partial<HttpLimits> = {}): HttpLimits {
  return { ...DEFAULT_LIMITS, ...overrides };
}

export interface JsonScan {
  /** Deepest nesting of arrays and objects. */
  depth: number;
  /** Whether some string holds an escaped or raw NUL. */
  nul: boolean;
}

/**
 * One pass over JSON text before it is parsed: the nesting depth (stops counting past `limit`)
 * and whether a string holds `\u0000`. Malformed text is left for JSON.parse to refuse.
 */
export function scanJson(text: string, limit: number): JsonScan {
  let depth = 0;
  let deepest = 0;
  let nul = false;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) {
        if (text.charCodeAt(i + 1) === 0x75 /* u */ && text.startsWith('0000', i + 2)) nul = true;
        i++;
      } else if (c === 0x22 /* " */) inString = false;
      else if (c === 0) nul = true;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b /* [ { */) {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return { depth: deepest, nul };
    } else if (c === 0x5d || c === 0x7d /* ] } */) depth--;
  }
  return { depth: deepest, nul };
}

/**
 * Whether JSON text could hold a `__proto__` or `constructor` key in any spelling (a key can hide
 * one only behind a `\u` escape). Only such text needs the prototype-poisoning checks of Fastify's
 * parser (secure-json-parse, two regex passes); for any other text plain JSON.parse gives the same
 * value (the poisoning checks cost ~2 µs of every JSON request).
 */
export function mayPoison(text: string): boolean {
  return text.includes('\\u') || text.includes('__proto__') || text.includes('constructor');
}

/** Where in a parsed body the first NUL sits, as `body.a[2].b`, for the 400's message. */
export function nulPath(value: unknown, at = 'body'): string | null {
  const stack: Array<[unknown, string]> = [[value, at]];
  while (stack.length) {
    const [v, path] = stack.pop() as [unknown, string];
    if (typeof v === 'string') {
      if (v.includes('\0')) return path;
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => {
        stack.push([item, `${path}[${i}]`]);
      });
    } else if (v && typeof v === 'object') {
      for (const [k, item] of Object.entries(v)) {
        if (k.includes('\0')) return `${path} (a field name)`;
        stack.push([item, `${path}.${k}`]);
      }
    }
  }
  return null;
}
