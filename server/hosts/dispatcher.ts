// Sends commands to hosts and waits for their one result (spec "Command lifecycle"):
// recorded before written; ack, progress (events on `cmd:<id>`), one result stored on the row;
// one command at a time per environment on a host; bounded by a timeout; failed promptly when the
// host's stream drops. Driver hosts run the same lifecycle in-process.
// It learns of host streams from the hub's events (connected / received / gone, wired in
// server/orchestrator.ts) and writes commands with the `send` of each stream's hello.

import { type CommandKind, LIVE_KINDS, type Payloads, type Results } from '../../protocol/commands.ts';
import { type CommandFailureType, type Frame, frame } from '../../protocol/frames.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import { bounded, KeyedQueue } from '../../shared/concurrency.ts';
import { Emitter } from '../../shared/emitter.ts';
import { guard } from '../../shared/faults.ts';
import { GroupCommit } from '../db/group-commit.ts';
import type { Db } from '../db/types.ts';
import { now } from '../db/types.ts';
import { COMMAND_FAILURE_STATUS, SvcError } from '../errors.ts';
import { appendEvent, type LiveEvents } from '../events/store.ts';
import { commandFinished } from '../metrics/channels.ts';
import { finishCommand, getCommand, insertCommand, markAcked, recordStable } from './command-store.ts';
import type { HostFrame, HostGone, HostHello } from './hub-events.ts';
import { checkResult, MalformedResult } from './result-check.ts';

/** A command that failed, with why (its type) beside the host's reason; its HTTP status follows the type. */
export class CommandError extends SvcError {
  readonly type: CommandFailureType;
  readonly commandId: string;
  constructor(type: CommandFailureType, message: string, commandId: string) {
    super(COMMAND_FAILURE_STATUS[type], message);
    this.type = type;
    this.commandId = commandId;
  }
}

/** Where a command goes: a sidecar over its stream, or a driver in-process. */
export interface CommandTarget {
  hostId: string;
  teamId: string;
  /** `sidecar` or `driver:<provider>`. */
  kind: string;
}

/** A result for a command no longer waited for (given up, timed out, or sent before a restart). */
export interface LateResult {
  hostId: string;
  frame: Frame;
}

export type DispatcherEvents = { late: LateResult };

/** A hosted-provider adapter; it runs a command kind for an environment and returns its result. */
export interface Driver {
  run(target: CommandTarget, envId: string, kind: CommandKind, payload: unknown): Promise<unknown>;
}

export interface Pending {
  id: string;
  hostId: string;
  teamId: string;
  kind: string;
  /** The lane it was sent in (`<host>/<lane>`, see `run`): its order there holds on other replicas. */
  lane?: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/**
 * Hosts whose stream another replica holds (server/cluster/relay.ts): a command for one goes to
 * that replica, which writes it to the stream and stores its outcome on the row. Absent on a
 * database for one replica: a host with no stream here is not connected.
 */
export interface RemoteHosts {
  /** Hands the command (its row is committed) to the replica holding its host; settles `p`. */
  forward(p: Pending): void;
  /** The command's wait ended here (settled, timed out, cancelled). */
  settled(id: string): void;
  /** True (once) when the command's outcome was read from its row: nothing to write again. */
  finishedElsewhere(id: string): boolean;
  /** An ack or result from a host here for a command another replica sent: true when it was one. */
  received(hostId: string, f: Frame): boolean;
  /** A host's stream here ended: what this replica wrote to it for others fails. */
  gone(e: HostGone): void;
}

/**
 * An ack is written to the command row only when the command is still running this long after
 * it: most commands (exec, put, get) finish sooner, and their ack time goes in with the result,
 * which saves one of three row writes per command.
 */
export const ACK_WRITE_AFTER_MS = 1000;

export const PHASE_TIMEOUT_MS = 15 * 60_000;

/**
 * Row writes wait briefly for others' (server/db/group-commit.ts) only while at least this many
 * other commands are in flight: a lone or nearly lone caller never waits.
 */
export const COMMIT_SIBLINGS = 1;

export class Dispatcher extends Emitter<DispatcherEvents> {
  #db: Db;
  /** Each connected sidecar host's stream, by host id. */
  #streams = new Map<string, HostHello['send']>();
  /** The command rows' writes: recorded, then finished, each committed with its turn's others. */
  #rows: GroupCommit;
  #drivers: Map<string, Driver>;
  #events: LiveEvents | undefined;
  #pending = new Map<string, Pending>();
  /** One command at a time per environment of a host. */
  #queue = new KeyedQueue();
  /** Per lane (see `run`): resolves once the lane's latest command was written to its host. */
  #lanes = new Map<string, Promise<void>>();
  #acks = new Map<string, { at: string; timer: NodeJS.Timeout }>();
  /** Commands between their row's insert and its outcome (#execute). */
  #inFlight = 0;
  /** This replica's id, recorded as each command's origin. */
  #replica: string;
  #remote: RemoteHosts | undefined;
  /** Bound of a command that names none: the phase bound (tests shorten it). */
  defaultTimeoutMs = PHASE_TIMEOUT_MS;

  constructor(
    db: Db,
    drivers: Map<string, Driver> = new Map(),
    log: { warn(obj: object, msg: string): void } = { warn: () => {} },
    /** How long a row's commit waits for company (group-commit.ts; default SVC_COMMIT_DELAY_MS). */
    commitDelayMs?: number,
    /** Where progress events go live once committed. */
    events?: LiveEvents,
    /** The other replicas' hosts, and this replica's part in commands for them. */
    cluster?: { replica: string; remote?: RemoteHosts },
  ) {
    super((err, _name, e) => log.warn({ err, host: e.hostId }, 'handling a late result failed'));
    this.#db = db;
    // Commands in flight besides the one writing: their rows' writes are worth waiting for.
    this.#rows = new GroupCommit(db, {
      busy: () => this.#inFlight - 1 >= COMMIT_SIBLINGS,
      delayMs: commitDelayMs,
    });
    this.#drivers = drivers;
    this.#events = events;
    this.#replica = cluster?.replica ?? '';
    this.#remote = cluster?.remote;
  }

  /** Row writes and commits so far, and how many commits waited for company (tests, benchmarks). */
  get rowStats(): Readonly<GroupCommit['stats']> {
    return this.#rows.stats;
  }

  /** A host's stream was accepted (the hub's `hello`): its commands go out on it from now on. */
  connected(h: HostHello): void {
    this.#streams.set(h.hostId, h.send);
  }

  /**
   * A frame from a host (the hub's `frame`): acks, progress and results of its commands. Acks and
   * results are handled at once, without a promise each (two per command on the exec hot path).
   */
  received(e: HostFrame): Promise<void> | undefined {
    switch (e.frame.type) {
      case 'ack':
        if (!this.#ack(e.hostId, e.frame)) this.#remote?.received(e.hostId, e.frame);
        return;
      case 'progress':
        return this.#progress(e.hostId, e.frame);
      case 'result':
        this.#result(e.hostId, e.frame);
        return;
    }
  }

  /** The host's stream dropped or was replaced (the hub's `gone`): its commands in flight fail now, not in 15 minutes. */
  gone(e: HostGone): void {
    this.#streams.delete(e.hostId);
    this.#remote?.gone(e);
    for (const p of [...this.#pending.values()]) {
      if (p.hostId !== e.hostId) continue;
      this.#pending.delete(p.id);
      p.reject(new CommandError('host_gone', `${p.kind}: ${e.reason}`, p.id));
    }
  }

  /**
   * Runs one command and returns its result payload; throws CommandError with the host's reason.
   * An aborted `signal` cancels it: the wait ends, the row is marked failed and the environment's
   * queue moves on (the sidecar may still finish it and keep the result, spec "Command lifecycle" 6).
   * Commands of one `lane` (a live process's input, resize, signal) are written to the host in the
   * order `run` was called, each once the one before it was written, not answered: the host
   * applies them in that order (sidecar/processes/lane.ts) without a round trip each.
   */
  async run<K extends CommandKind>(
    target: CommandTarget,
    envId: string,
    kind: K,
    payload: Payloads[K],
    timeoutMs: number = this.defaultTimeoutMs,
    signal?: AbortSignal,
    lane?: string,
    /** A stable id (a deployment verdict's command): see command-store.ts recordStable. */
    commandId?: string,
  ): Promise<Results[K]> {
    // Live-process kinds act on running processes at once, beside the environment's queue.
    const key = envId && !LIVE_KINDS.has(kind) ? `${target.hostId}/${envId}` : '';
    const turn = lane ? this.#laneTurn(`${target.hostId}/${lane}`) : undefined;
    const exec = () => {
      if (signal?.aborted) throw cancelled(kind, signal);
      return this.#execute(target, envId, kind, payload, timeoutMs, signal, turn, commandId);
    };
    try {
      const result = await this.#queue.run(key, exec, signal);
      return result as Results[K];
    } finally {
      turn?.written(); // never left holding its lane, whatever happened before it was sent
    }
  }

  /** This command's place in `key`'s lane: wait for `before`, call `written` once sent (or failed). */
  #laneTurn(key: string): { key: string; before: Promise<void>; written: () => void } {
    const before = this.#lanes.get(key) ?? Promise.resolve();
    let written!: () => void;
    const mine = new Promise<void>((r) => {
      written = r;
    });
    this.#lanes.set(key, mine);
    void mine.then(() => {
      if (this.#lanes.get(key) === mine) this.#lanes.delete(key);
    });
    return { key, before, written };
  }

  async #execute(
    target: CommandTarget,
    envId: string,
    kind: CommandKind,
    payload: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
    turn?: { before: Promise<void>; written: () => void; key?: string },
    commandId?: string,
  ) {
    let id = commandId ?? newId(PREFIX.command);
    const t0 = Date.now();
    let ok = false;
    const { hostId, teamId } = target;
    const row = { id, hostId, envId, teamId, kind, payload, origin: this.#replica };
    this.#inFlight++;
    let outcome: Promise<unknown>;
    try {
      const had = await this.#rows.write((q) =>
        commandId ? recordStable(q, row) : insertCommand(q, row).then(() => undefined),
      );
      if (had) id = row.id = had.id;
      await turn?.before;
      outcome =
        had && 'result' in had
          ? Promise.resolve(had.result)
          : target.kind === 'sidecar'
            ? this.#overStream(id, target, envId, kind, payload, turn?.key)
            : this.#viaDriver(id, target, envId, kind, payload);
    } catch (err) {
      this.#inFlight--;
      throw err;
    } finally {
      turn?.written();
    }
    const limited = bounded(
      outcome,
      timeoutMs,
      () => new CommandError('timeout', `${kind} timed out after ${seconds(timeoutMs)}`, id),
      signal,
      () => new CommandError('cancelled', cancelled(kind, signal).message, id),
    );
    try {
      // Shape-checked before the row says succeeded: a malformed result fails the command (502).
      const result = checkResult(kind, await limited);
      const acked = this.#takeAck(id);
      if (!this.#remote?.finishedElsewhere(id))
        await this.#rows.write((q) => finishCommand(q, id, { ok: true, result }, acked, this.#replica));
      ok = true;
      return result;
    } catch (err) {
      const message = (err as Error).message;
      const acked = this.#takeAck(id);
      const type = err instanceof CommandError ? err.type : undefined;
      if (!this.#remote?.finishedElsewhere(id))
        await this.#rows.write((q) =>
          finishCommand(q, id, { ok: false, error: message, type }, acked, this.#replica),
        );
      throw err instanceof CommandError
        ? err
        : new CommandError(err instanceof MalformedResult ? 'malformed' : 'host_error', message, id);
    } finally {
      this.#inFlight--;
      this.#pending.delete(id);
      this.#remote?.settled(id);
      commandFinished.publish({ kind, ok, ms: Date.now() - t0 });
    }
  }

  #overStream(
    id: string,
    target: CommandTarget,
    envId: string,
    kind: string,
    payload: unknown,
    lane?: string,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const p = { id, hostId: target.hostId, teamId: target.teamId, kind, lane, resolve, reject };
      this.#pending.set(id, p);
      const send = this.#streams.get(target.hostId);
      const sent = send?.(frame('command', { command_id: id, kind, env_id: envId, payload }));
      if (sent) return;
      // Not here: the replica holding the host's stream sends it, when one does.
      if (!send && this.#remote) return this.#remote.forward(p);
      reject(new CommandError('host_gone', `host ${target.hostId} is not connected`, id));
    });
  }

  async #viaDriver(id: string, target: CommandTarget, envId: string, kind: CommandKind, payload: unknown) {
    const provider = target.kind.replace(/^driver:/, '');
    const driver = this.#drivers.get(provider);
    if (!driver)
      throw new CommandError('host_error', `${provider}: ${kind}: not supported on ${provider} yet`, id);
    return driver.run(target, envId, kind, payload);
  }

  /** False for an ack of no command this replica waits for. */
  #ack(hostId: string, f: Frame): boolean {
    const p = this.#pending.get(f.command_id as string);
    if (!p || p.hostId !== hostId) return false;
    if (this.#acks.has(p.id)) return true;
    const at = now();
    const timer = setTimeout(
      guard('dispatcher: ack write', () => {
        if (this.#pending.has(p.id)) void markAcked(this.#db, p.id, at).catch(() => {});
      }),
      ACK_WRITE_AFTER_MS,
    );
    timer.unref();
    this.#acks.set(p.id, { at, timer });
    return true;
  }

  /** The ack time for the result's row write (and no separate write any more). */
  #takeAck(id: string): string | undefined {
    const a = this.#acks.get(id);
    if (!a) return undefined;
    clearTimeout(a.timer);
    this.#acks.delete(id);
    return a.at;
  }

  async #progress(hostId: string, f: Frame): Promise<void> {
    const id = f.command_id as string;
    const p = this.#pending.get(id);
    const teamId = p && p.hostId === hostId ? p.teamId : (await this.#ownRow(hostId, id))?.team_id;
    if (teamId)
      await appendEvent(
        this.#db,
        teamId,
        `cmd:${id}`,
        'command.progress',
        { message: f.message ?? '' },
        this.#events,
      );
  }

  /** The one result of a command. Results for finished, unknown or foreign command ids are ignored. */
  #result(hostId: string, f: Frame): void {
    const id = f.command_id as string;
    const p = this.#pending.get(id);
    if (!p || p.hostId !== hostId) {
      if (!this.#remote?.received(hostId, f)) this.emit('late', { hostId, frame: f });
      return;
    }
    this.#pending.delete(id);
    if (f.ok) p.resolve(f.payload ?? {});
    else
      p.reject(
        new CommandError(f.error_type ?? 'host_error', f.error || `${p.kind} failed without a reason`, id),
      );
  }

  async #ownRow(hostId: string, id: string) {
    const row = await getCommand(this.#db, id);
    return row && row.host_id === hostId ? row : undefined;
  }
}

function cancelled(kind: string, signal: AbortSignal | undefined): Error {
  const why = signal?.reason instanceof Error ? signal.reason.message : 'the phase was cancelled';
  return new Error(`${kind} cancelled: ${why}`);
}

const seconds = (ms: number): string => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);
