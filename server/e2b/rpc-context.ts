// What an envd Connect-RPC call knows besides its message: the sandbox it was authenticated for,
// and a signal that fires when that sandbox ends (killed, expired or paused), so its open streams
// end at once rather than when the host notices.
import { Code, ConnectError, createContextKey, type HandlerContext } from '@connectrpc/connect';
import { SvcError } from '../errors.ts';
import type { E2bSandboxRow } from './store.ts';

const CODES: Record<number, Code> = {
  400: Code.InvalidArgument,
  401: Code.Unauthenticated,
  403: Code.PermissionDenied,
  404: Code.NotFound,
  409: Code.FailedPrecondition,
  411: Code.InvalidArgument,
  413: Code.ResourceExhausted,
  429: Code.ResourceExhausted,
  501: Code.Unimplemented,
  502: Code.Unavailable,
  503: Code.Unavailable,
  504: Code.DeadlineExceeded,
};

/** An svc failure as a Connect error (envd's words: the message, and the matching code). */
export function rpcError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof SvcError) return new ConnectError(err.message, CODES[err.status] ?? Code.Internal);
  return new ConnectError('internal error', Code.Internal);
}

/** Runs `work`, its svc failure thrown as a Connect error. */
export async function rpcCall<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    throw rpcError(err);
  }
}

export const SANDBOX = createContextKey<E2bSandboxRow | null>(null, { description: 'the envd sandbox' });
export const ENDED = createContextKey<AbortSignal | null>(null, { description: 'the sandbox ended' });

export function sandboxOf(c: HandlerContext): E2bSandboxRow {
  const row = c.values.get(SANDBOX);
  if (!row) throw new ConnectError('sandbox not resolved', Code.Internal);
  return row;
}

/** Aborts when the client goes, the call's deadline passes, or the sandbox ends. */
export function callSignal(c: HandlerContext): AbortSignal {
  const ended = c.values.get(ENDED);
  return ended ? AbortSignal.any([c.signal, ended]) : c.signal;
}

/** The open calls of each sandbox, ended together when it ends. */
export class OpenCalls {
  readonly #by = new Map<string, Set<AbortController>>();

  /** A signal for one call of `sandboxId`, forgotten when `until` closes. */
  open(sandboxId: string, until: { once(event: 'close', fn: () => void): unknown }): AbortSignal {
    const ac = new AbortController();
    const set = this.#by.get(sandboxId) ?? new Set<AbortController>();
    this.#by.set(sandboxId, set);
    set.add(ac);
    until.once('close', () => {
      set.delete(ac);
      if (set.size === 0 && this.#by.get(sandboxId) === set) this.#by.delete(sandboxId);
    });
    return ac.signal;
  }

  end(sandboxId: string): void {
    const set = this.#by.get(sandboxId);
    this.#by.delete(sandboxId);
    for (const ac of set ?? []) ac.abort(new ConnectError(`sandbox ${sandboxId} ended`, Code.Unavailable));
  }

  get size(): number {
    return this.#by.size;
  }
}
