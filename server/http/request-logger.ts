// Each request's logger, kept off the exec hot path. Fastify gives every request a pino child
// bound to its request id; building one costs ~1-2 µs, and with per-request lines off (no -v)
// most requests never log. This stands in for the child and builds it on the first line logged,
// so a request that logs nothing pays for one small object; what it logs is unchanged.
import type { FastifyBaseLogger } from 'fastify';

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

class LazyChild {
  #parent: FastifyBaseLogger;
  #bindings: Bindings;
  #options: ChildOptions;
  #real: FastifyBaseLogger | undefined;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  get real(): FastifyBaseLogger {
    this.#real ??= this.#parent.child(this.#bindings, this.#options);
    return this.#real;
  }

  get level(): string {
    return this.#real ? this.#real.level : (this.#options?.level ?? this.#parent.level);
  }

  set level(level: string) {
    this.real.level = level;
  }

  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.real.child(bindings, options);
  }
}

// One method per level, each logging on the real child (built by the first of them to run).
for (const level of LEVELS) {
  Object.defineProperty(LazyChild.prototype, level, {
    value(this: LazyChild, ...args: unknown[]): void {
      (this.real[level] as (...a: unknown[]) => void)(...args);
    },
  });
}

/** Fastify's `childLoggerFactory`: the request's child logger, built when first used. */
export function lazyRequestLogger(
  parent: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildOptions,
): FastifyBaseLogger {
  return new LazyChild(parent, bindings, options) as unknown as FastifyBaseLogger;
}
