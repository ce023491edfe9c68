// Errors of the storage layer. The sidecar turns them into a command's `error` string, so every
// message names what it is about (env, snapshot, volume, or the failed command with its stderr).

export class StorageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A name (env id, volume, snapshot) that could address something outside the data dir. */
export class BadName extends StorageError {}

/** The env has no snapshot of that name; the caller asked for a version this host never captured. */
export class UnknownSnapshot extends StorageError {
  readonly envId: string;
  readonly snapshot: string;
  constructor(envId: string, snapshot: string, detail = '') {
    super(`env ${envId} has no snapshot ${snapshot}${detail ? ` (${detail})` : ''}`);
    this.envId = envId;
    this.snapshot = snapshot;
  }
}

/** A helper program (cp, btrfs, zfs, ...) exited non-zero; the message carries its stderr. */
export class CommandFailed extends StorageError {
  readonly stderr: string;
  constructor(argv: string[], stderr: string, cause: string) {
    super(`${argv.join(' ')}: ${stderr.trim() || cause}`);
    this.stderr = stderr;
  }
}
