// Runs commands from the control plane (spec "Command lifecycle"): ack at once, progress lines
// while working, exactly one result. Every result is written to <data>/commands/<id>.json before
// it is sent, so a command id seen again (a resend after a reconnect, a replay) is answered from
// that file without running twice. One command at a time per environment; environments run
// concurrently. Each payload is checked against its schema on receipt (payload.ts): a handler only
// ever sees a payload of its kind's type, and a malformed one is refused without running.
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { type CommandKind, LIVE_KINDS, type Payloads, UNKNOWN_KIND_ERROR } from '../protocol/commands.ts';
import { type CommandFailureType, type Frame, frame } from '../protocol/frames.ts';
import { writeFileAtomic, writeFileAtomicSync } from '../shared/atomic-file.ts';
import { KeyedQueue } from '../shared/concurrency.ts';
import { PayloadError, readPayload } from './payload.ts';
import type { Hold } from './test-hold.ts';

export interface CommandContext<K extends CommandKind = CommandKind> {
  id: string;
  envId: string;
  /** Checked against the kind's schema (defaults filled in) before the handler runs. */
  payload: Payloads[K];
  progress(message: string): void;
}

export type Handler<K extends CommandKind = CommandKind> = (ctx: CommandContext<K>) => Promise<unknown>;

/** A handler per kind the sidecar runs; any other kind is answered `unknown command kind`. */
export type Handlers = { [K in CommandKind]?: Handler<K> };

interface Stored {
  ok: boolean;
  payload?: unknown;
  error?: string;
  /** Why it failed (results stored before the type existed have none: the server reads host_error). */
  error_type?: CommandFailureType;
  kind: string;
  env_id: string;
  finished_at: string;
}

const SAFE_ID = /^[A-Za-z0-9_-]{1,100}$/;
/**
 * Direct commands (exec, file transfer) are the exec hot path: their results are stored in one
 * synchronous step without the flushes (measured on a loaded 2-core machine, exec p50: 16-18 ms
 * so, 30 ms through the thread pool, 34 ms flushed). A process crash still cannot tear one
 * (rename); after a power loss one may be lost, and a resent id then runs again (in containers
 * that restarted with the host). A warm-pool claim's env.unpause is on the same path (its flush
 * took 1-9 ms while a refill's fork wrote to the disk) and running it again thaws nothing new.
 * Stack commands, seconds long, flush theirs.
 */
const DIRECT_KINDS: ReadonlySet<string> = new Set(['env.exec', 'env.put', 'env.get', 'env.unpause']);

/** `<data>/commands/by-env/<env>`: the ids of an environment's stored results, one a line. */
const byEnv = (dataDir: string, envId: string) => join(dataDir, 'commands', 'by-env', envId);

/**
 * Removes the stored results of every command an environment ran (exec output, grader output):
 * a destroyed environment leaves nothing of what it held on the host. The destroy's own result
 * stays, so a resent destroy is still answered from its file.
 */
export async function forgetEnvCommands(dataDir: string, envId: string): Promise<number> {
  if (!SAFE_ID.test(envId)) return 0;
  const index = byEnv(dataDir, envId);
  const ids = (await readFile(index, 'utf8').catch(() => '')).split('\n').filter((x) => SAFE_ID.test(x));
  for (const id of ids) await rm(join(dataDir, 'commands', `${id}.json`), { force: true });
  await rm(index, { force: true });
  return ids.length;
}

export class Runner {
  #dir: string;
  #handlers: Handlers;
  #send: (f: Frame) => void;
  /** One command at a time per environment. */
  #queue = new KeyedQueue();
  #running = new Map<string, Promise<void>>();
  #hold: Hold | undefined;

  #dataDir: string;

  constructor(dataDir: string, handlers: Handlers, send: (f: Frame) => void, hold?: Hold) {
    this.#dataDir = dataDir;
    this.#dir = join(dataDir, 'commands');
    mkdirSync(join(this.#dir, 'by-env'), { recursive: true, mode: 0o700 });
    this.#handlers = handlers;
    this.#send = send;
    this.#hold = hold;
  }

  /** Handles one `command` frame; never throws. Returns when the command's result was sent. */
  handle(f: Frame): Promise<void> {
    const id = f.command_id ?? '';
    if (!id) return Promise.resolve(); // nothing to answer to
    if (!SAFE_ID.test(id)) {
      // It cannot name a result file, so it is refused without running (and without storing).
      this.#send(
        frame('result', { command_id: id, ok: false, error: 'invalid command id', error_type: 'malformed' }),
      );
      return Promise.resolve();
    }
    this.#send(frame('ack', { command_id: id }));
    if (LIVE_KINDS.has(f.kind ?? '')) return this.#live(f);
    const stored = this.#stored(id);
    if (stored) {
      this.#reply(id, stored);
      return Promise.resolve();
    }
    const inFlight = this.#running.get(id);
    if (inFlight) return inFlight; // the result goes out on whatever stream is current when it ends
    const run = this.#queue
      .run(f.env_id ?? '', () => this.#execute(f))
      .finally(() => this.#running.delete(id));
    this.#running.set(id, run);
    return run;
  }

  /** A live-process command: at once, beside the environment's queue, its result not kept. */
  async #live(f: Frame): Promise<void> {
    this.#reply(f.command_id as string, await this.#outcome(f, () => {}));
  }

  async #execute(f: Frame): Promise<void> {
    const id = f.command_id as string;
    // A marker while it runs: if the process dies, the next start knows what was cut off.
    writeFileSync(this.#marker(id), JSON.stringify({ kind: f.kind ?? '', env_id: f.env_id ?? '' }), {
      mode: 0o600,
    });
    const outcome = await this.#outcome(f, (message) =>
      this.#send(frame('progress', { command_id: id, message })),
    );
    await this.#hold?.(outcome.kind, id);
    await this.#store(id, outcome);
    rmSync(this.#marker(id), { force: true });
    this.#reply(id, outcome);
  }

  /** Runs the kind's handler with the checked payload; never throws. */
  async #outcome(f: Frame, progress: (message: string) => void): Promise<Stored> {
    const kind = f.kind as CommandKind;
    const handler = Object.hasOwn(this.#handlers, kind) ? (this.#handlers[kind] as Handler) : undefined;
    const base = { kind: f.kind ?? '', env_id: f.env_id ?? '' };
    try {
      if (!handler) throw new Error(UNKNOWN_KIND_ERROR);
      const result = await handler({
        id: f.command_id as string,
        envId: f.env_id ?? '',
        payload: readPayload(kind, f.payload),
        progress,
      });
      return { ...base, ok: true, payload: result ?? {}, finished_at: new Date().toISOString() };
    } catch (err) {
      return {
        ...base,
        ok: false,
        error: (err as Error).message || String(err),
        // A payload refused on receipt (or by a handler's own checks) is malformed; anything else the host failed at.
        error_type: err instanceof PayloadError ? 'malformed' : 'host_error',
        finished_at: new Date().toISOString(),
      };
    }
  }

  #marker(id: string): string {
    return join(this.#dir, `${id}.running`);
  }

  /**
   * After a crash: every command that was running gets its one stored result (a failure that
   * says so), after `cleanup` undid what it can, so a resent id is answered, never run twice.
   */
  async recover(
    cleanup: (kind: string, envId: string) => Promise<void>,
    log: (msg: string) => void,
  ): Promise<string[]> {
    const cut: string[] = [];
    for (const file of readdirSync(this.#dir).filter((f) => f.endsWith('.running'))) {
      const id = file.slice(0, -'.running'.length);
      let base = { kind: '', env_id: '' };
      try {
        base = JSON.parse(readFileSync(join(this.#dir, file), 'utf8'));
      } catch {}
      await cleanup(base.kind, base.env_id).catch((err) =>
        log(`undoing ${base.kind} of ${base.env_id} cut off by a restart failed: ${(err as Error).message}`),
      );
      await this.#store(id, {
        ...base,
        ok: false,
        error: `the sidecar restarted while running ${base.kind}`,
        error_type: 'host_error',
        finished_at: new Date().toISOString(),
      });
      rmSync(join(this.#dir, file), { force: true });
      cut.push(`${base.kind} ${base.env_id}`.trim());
    }
    return cut;
  }

  #reply(id: string, s: Stored): void {
    this.#send(
      frame(
        'result',
        s.ok
          ? { command_id: id, ok: true, payload: s.payload }
          : { command_id: id, ok: false, error: s.error, error_type: s.error_type },
      ),
    );
  }

  #path(id: string): string {
    return join(this.#dir, `${id}.json`);
  }

  #stored(id: string): Stored | null {
    const p = this.#path(id);
    if (!existsSync(p)) return null;
    try {
      return JSON.parse(readFileSync(p, 'utf8')) as Stored;
    } catch {
      return null; // a torn file cannot exist (atomic rename); treat anything unreadable as not run
    }
  }

  async #store(id: string, s: Stored): Promise<void> {
    const text = JSON.stringify(s);
    if (DIRECT_KINDS.has(s.kind)) writeFileAtomicSync(this.#path(id), text, { mode: 0o600, durable: false });
    else await writeFileAtomic(this.#path(id), text, { mode: 0o600 });
    if (s.env_id && SAFE_ID.test(s.env_id) && s.kind !== 'env.destroy')
      appendFileSync(byEnv(this.#dataDir, s.env_id), `${id}\n`, { mode: 0o600 });
  }

  /** Waits for every running command (graceful stop). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#running.values()]);
  }
}
