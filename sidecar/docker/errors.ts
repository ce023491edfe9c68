// Errors of the Docker layer. The sidecar turns them into a command's `error` string, so each
// message says which service or tool failed and carries Docker's own words for the cause.

export const EGRESS_LEAK_INTERNET = 'egress is denied but the stack reached the internet';
export const EGRESS_LEAK_HOST = 'egress is denied but the stack reached the host';

export class DockerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A compose invocation exited non-zero; the message carries its stderr tail. */
export class ComposeRunError extends DockerError {
  readonly stderr: string;
  constructor(argv: string[], stderr: string, cause: string) {
    super(`${argv.join(' ')}: ${tail(stderr, 20) || cause}`);
    this.stderr = stderr;
  }
}

/** No compose tool on the machine (neither the v2 plugin nor docker-compose v1). */
export class NoComposeTool extends DockerError {}

/** A stack did not become healthy: a container exited, went unhealthy, or the wait timed out. */
export class StackUnhealthy extends DockerError {}

/** The service has no container in the env's stack (not created, or the stack is down). */
export class NoSuchService extends DockerError {}

/** The engine refused to create the exec (no such container, not running, paused): nothing ran. */
export class ExecNotCreated extends DockerError {}

/** An exec ran past its timeout. Carries what the command printed before it was stopped. */
export class ExecTimeout extends DockerError {
  readonly stdout: string;
  readonly stderr: string;
  readonly killed: boolean;
  /** What became of the command: `the command was killed`, or why it may still run. */
  readonly kill: string;
  constructor(service: string, timeoutSec: number, out: { stdout: string; stderr: string }, kill: string) {
    super(`exec in service '${service}' timed out after ${timeoutSec}s; ${kill}`);
    this.kill = kill;
    this.stdout = out.stdout;
    this.stderr = out.stderr;
    this.killed = kill.startsWith('the command was killed');
  }
}

/** A tar going in or out of a container is over the 32 MiB limit. */
export class ArchiveTooLarge extends DockerError {}

/** A deny stack reached something it must not reach. The stack has been stopped. */
export class EgressLeak extends DockerError {
  readonly reached: string[];
  /** Set when stopping the leaking stack failed as well. */
  stopError = '';
  constructor(message: string, reached: string[]) {
    super(message);
    this.reached = reached;
  }
}

/** The egress probe itself could not run, so nothing is known about the stack's egress. */
export class ProbeError extends DockerError {
  constructor(reason: string) {
    super(`egress probe failed to run: ${reason}`);
  }
}

/** Installing or removing the host firewall rules of a deny stack failed. */
export class FirewallError extends DockerError {}

/** A database checkpoint before a snapshot failed; the snapshot would not be consistent. */
export class CheckpointError extends DockerError {}

/** The last `lines` non-empty lines of a text, for error messages. */
export function tail(text: string, lines: number): string {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(-lines)
    .join('\n');
}

/** Docker's own message from a dockerode error (`(HTTP code 404) no such container - <json message>`). */
export function dockerMessage(err: unknown): string {
  const e = err as { json?: { message?: string } | null; message?: string; reason?: string };
  if (e?.json && typeof e.json === 'object' && typeof e.json.message === 'string')
    return e.json.message.trim();
  const text = e?.message ?? String(err);
  // dockerode's own wording around the engine's: '(HTTP code 404) no such container - <engine message>'.
  return (/^\(HTTP code \d+\) .*? - (.+)$/s.exec(text)?.[1] ?? text).trim();
}

export function statusCode(err: unknown): number | undefined {
  const code = (err as { statusCode?: unknown })?.statusCode;
  return typeof code === 'number' ? code : undefined;
}
