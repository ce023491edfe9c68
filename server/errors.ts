// The typed error hierarchy of the control plane. Domain code throws these; the HTTP layer maps
// them to `{error: message}` with the status; deployments record `<phase>: <message>`.
import type { CommandFailureType } from '../protocol/frames.ts';

export class SvcError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
    this.name = new.target.name;
  }
}

export class BadRequest extends SvcError {
  constructor(message: string) {
    super(400, message);
  }
}
export class Unauthorized extends SvcError {
  constructor(message = 'unauthorized') {
    super(401, message);
  }
}
export class Forbidden extends SvcError {
  constructor(message = 'forbidden') {
    super(403, message);
  }
}
export class NotFound extends SvcError {
  constructor(message = 'not found') {
    super(404, message);
  }
}
export class Conflict extends SvcError {
  constructor(message: string) {
    super(409, message);
  }
}
export class Gone extends SvcError {
  constructor(message: string) {
    super(410, message);
  }
}
export class TooLarge extends SvcError {
  constructor(message: string) {
    super(413, message);
  }
}
export class PreconditionRequired extends SvcError {
  constructor(message: string) {
    super(428, message);
  }
}
/** A rate limit or lock-out; the answer carries `Retry-After`. */
export class TooManyRequests extends SvcError {
  readonly retryAfterSec: number;
  constructor(message: string, retryAfterSec: number) {
    super(429, message);
    this.retryAfterSec = Math.max(1, Math.ceil(retryAfterSec));
  }
}
/** The host or an upstream refused or could not run the command. */
export class Upstream extends SvcError {
  constructor(message: string) {
    super(502, message);
  }
}
export class NotConfigured extends SvcError {
  constructor(message: string) {
    super(503, message);
  }
}
export class Timeout extends SvcError {
  constructor(message: string) {
    super(504, message);
  }
}

/**
 * A failed host command's HTTP status, chosen by its type (never by its text): a command the host
 * did not answer in time is a 504; one it refused, failed, answered malformed, or could not be
 * reached for (or that was cancelled) is a 502: the host could not run it.
 */
export const COMMAND_FAILURE_STATUS: Record<CommandFailureType, number> = {
  timeout: 504,
  cancelled: 502,
  host_gone: 502,
  host_error: 502,
  malformed: 502,
};
