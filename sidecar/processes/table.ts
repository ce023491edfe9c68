// Live processes of this host (spec "Live processes"): Engine API execs that outlive the command
// that started them (a container's spare exec when the process can run on it, on-spare.ts), each with a bounded ring of its output and the followers the control plane
// attached. Output goes out as binary frames (protocol/processes.ts) while the process runs: small
// writes are coalesced into frames of up to 64 KiB per event-loop turn, and a follower whose
// stream is backed up (the host stream's send buffer over HIGH_WATER) gets a `gap` for what it
// missed instead of unbounded memory. Nothing a follower does blocks the process: it never waits.
// Lives in the sidecar's context, one per process; a restart of svcd forgets every process.
import { constants } from 'node:os';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import type { Payloads } from '../../protocol/commands.ts';
import { newId, PREFIX } from '../../protocol/ids.ts';
import {
  encodeOutput,
  MAX_EXITED_PER_ENV,
  MAX_FOLLOWERS_PER_PROCESS,
  MAX_OUTPUT_FRAME,
  MAX_PROCESSES_PER_ENV,
  MAX_STDIN_CHUNK,
  NO_SUCH_PROCESS,
  PROCESS_LIMIT,
  PROCESS_REFUSED,
  PROCESS_RING_BYTES,
  type ProcessEnd,
  type ProcessInfo,
} from '../../protocol/processes.ts';
import { sleep } from '../../shared/concurrency.ts';
import type { DockerEngine } from '../docker/engine.ts';
import { DockerError, dockerMessage } from '../docker/errors.ts';
import { checkCommand, exitCode } from '../docker/exec.ts';
import { ControlLanes, written } from './lane.ts';
import { openProcess } from './on-spare.ts';
import type { OrphanRecords } from './orphans.ts';
import { type Chunk, OutputRing } from './ring.ts';
import { initialSize, type SandboxTask, SandboxTasks, signalSandboxTask } from './start.ts';

/** Where output frames go: the host stream, while it is open. */
export interface OutputLink {
  /** False when the stream is not open (the frame is lost; followers end with the stream anyway). */
  send(frame: Buffer): boolean;
  /** Bytes queued on the stream and not yet written. */
  buffered(): number;
}

/** Past this many queued bytes on the host stream, followers get gaps instead of output. */
export const HIGH_WATER = 8 * 1024 * 1024;

interface Follower {
  id: string;
  /** Pending gap: output dropped for this follower and not yet reported. 0 = none. */
  gapFrom: number;
  gapTo: number;
}

interface Proc {
  info: ProcessInfo;
  envId: string;
  exec: Docker.Exec;
  stream: Duplex;
  ring: OutputRing;
  seq: number;
  pending: { kind: Chunk['kind']; parts: Buffer[]; bytes: number } | null;
  flushQueued: boolean;
  followers: Map<string, Follower>;
  stdinOpen: boolean;
  /** Signals sent, by number, to name the one that ended it. */
  sent: Set<number>;
  /** Under gVisor: the process in the sandbox, signalled there (sandboxed.ts). */
  task: SandboxTask | null;
}

export class ProcessTable {
  #engineOf: (envId: string) => DockerEngine;
  #link: OutputLink;
  #log: (msg: string) => void;
  #records: OrphanRecords | undefined;
  /** Processes by env, then pid (insertion order = start order). */
  #envs = new Map<string, Map<string, Proc>>();
  /** Starts in flight per env: they count against the limit before they exist. */
  #starting = new Map<string, number>();
  /** Every follower on the current stream, by id. */
  #followers = new Map<string, Proc>();
  #sandboxed = new SandboxTasks();
  /** Each process's input, resize and signals, in the order they came (lane.ts). */
  #lanes = new ControlLanes();

  /** `records`: where each live process is noted, so the next svcd can kill what this one left. */
  constructor(
    engineOf: (envId: string) => DockerEngine,
    link: OutputLink,
    log: (msg: string) => void,
    records?: OrphanRecords,
  ) {
    this.#engineOf = engineOf;
    this.#link = link;
    this.#log = log;
    this.#records = records;
  }

  #procs(envId: string): Map<string, Proc> {
    let m = this.#envs.get(envId);
    if (!m) {
      m = new Map();
      this.#envs.set(envId, m);
    }
    return m;
  }

  #get(envId: string, pid: string): Proc {
    const p = this.#envs.get(envId)?.get(pid);
    if (!p) throw new Error(`${NO_SUCH_PROCESS}: ${pid} is not a process of ${envId} on this host`);
    return p;
  }

  async start(envId: string, o: Payloads['proc.start']): Promise<{ pid: string; started_at: string }> {
    checkCommand(o.cmd);
    const procs = this.#procs(envId);
    const running = [...procs.values()].filter((p) => p.info.status === 'running').length;
    const starting = this.#starting.get(envId) ?? 0;
    if (running + starting >= MAX_PROCESSES_PER_ENV)
      throw new Error(
        `${PROCESS_LIMIT}: the environment already runs ${MAX_PROCESSES_PER_ENV} processes; end one first`,
      );
    this.#starting.set(envId, starting + 1);
    try {
      return await this.#start(envId, procs, o);
    } finally {
      this.#starting.set(envId, (this.#starting.get(envId) ?? 1) - 1);
    }
  }

  async #start(envId: string, procs: Map<string, Proc>, o: Payloads['proc.start']) {
    const tty = o.tty;
    const opened = await openProcess(this.#engineOf(envId), this.#sandboxed, o);
    const { exec, stream, task } = opened;
    const info: ProcessInfo = {
      pid: newId(PREFIX.process),
      service: o.service,
      cmd: o.cmd,
      status: 'running',
      started_at: new Date().toISOString(),
      tty: Boolean(tty),
      stdin: o.stdin,
    };
    const p: Proc = {
      info,
      envId,
      exec,
      stream,
      ring: new OutputRing(PROCESS_RING_BYTES),
      seq: 0,
      pending: null,
      flushQueued: false,
      followers: new Map(),
      stdinOpen: o.stdin,
      sent: new Set(),
      task,
    };
    procs.set(info.pid, p);
    opened.pipe((kind, data) => this.#output(p, kind, data));
    if (tty)
      await initialSize(exec, tty, opened.ended, (m) => this.#log(`sizing ${info.pid}'s terminal: ${m}`));
    this.#record(p).catch((err) => this.#log(`recording process ${info.pid}: ${(err as Error).message}`));
    // Guarded: a broken stream ends the process's record, never svcd.
    opened.ended.then(
      () => this.#ended(p, ''),
      (err) => this.#ended(p, `output stream failed: ${dockerMessage(err)}`),
    );
    return { pid: info.pid, started_at: info.started_at };
  }

  /**
   * The exec's host pid; the engine reports it a moment after the start (0: it never did, or it
   * ended). A loaded engine can take seconds to, and without the pid the next svcd cannot kill what
   * this one leaves running: asked for up to ~30 s while the process runs (nothing waits on it).
   */
  async #hostPid(p: Proc): Promise<number> {
    for (let i = 0; i < 150 && p.info.status === 'running'; i++) {
      const info = await p.exec.inspect();
      if (info.Pid) return info.Running ? info.Pid : 0;
      await sleep(i < 50 ? 20 : 500);
    }
    return 0;
  }

  /** Notes the exec's host pid, so the next svcd can kill what this one leaves running. */
  async #record(p: Proc): Promise<void> {
    if (!this.#records) return;
    const hostPid = await this.#hostPid(p);
    if (!hostPid) return;
    await this.#records.record(p.info.pid, hostPid, p.task);
    // It may have ended while this was written.
    if (p.info.status !== 'running') this.#records.forget(p.info.pid);
  }

  #output(p: Proc, kind: Chunk['kind'], data: Buffer): void {
    for (let at = 0; at < data.length; at += MAX_OUTPUT_FRAME) {
      const piece = data.subarray(at, at + MAX_OUTPUT_FRAME);
      if (p.pending && (p.pending.kind !== kind || p.pending.bytes + piece.length > MAX_OUTPUT_FRAME))
        this.#flush(p);
      p.pending ??= { kind, parts: [], bytes: 0 };
      p.pending.parts.push(piece);
      p.pending.bytes += piece.length;
    }
    if (!p.flushQueued) {
      p.flushQueued = true;
      setImmediate(() => {
        p.flushQueued = false;
        this.#flush(p);
      });
    }
  }

  /** The coalesced output becomes one chunk: numbered, kept in the ring, sent to each follower. */
  #flush(p: Proc): void {
    const pend = p.pending;
    if (!pend) return;
    p.pending = null;
    const data = pend.parts.length === 1 ? pend.parts[0] : Buffer.concat(pend.parts);
    const chunk: Chunk = { seq: ++p.seq, kind: pend.kind, data };
    p.ring.push(chunk);
    for (const f of p.followers.values()) this.#deliver(f, chunk);
  }

  #deliver(f: Follower, c: Chunk): void {
    if (this.#link.buffered() > HIGH_WATER) {
      if (!f.gapFrom) f.gapFrom = c.seq;
      f.gapTo = c.seq;
      return;
    }
    this.#sendGap(f);
    this.#link.send(encodeOutput({ kind: c.kind, follow: f.id, seq: c.seq, data: c.data }));
  }

  #sendGap(f: Follower): void {
    if (!f.gapFrom) return;
    this.#link.send(encodeOutput({ kind: 'gap', follow: f.id, from: f.gapFrom, to: f.gapTo }));
    f.gapFrom = 0;
    f.gapTo = 0;
  }

  async #ended(p: Proc, reason: string): Promise<void> {
    this.#flush(p);
    let code: number | null = null;
    try {
      code = await exitCode(p.exec, p.info.service);
    } catch (err) {
      reason ||= `no exit code: ${(err as Error).message}`;
    }
    if (reason) this.#log(`process ${p.info.pid} of ${p.envId}: ${reason}`);
    this.#flush(p); // anything the stream delivered while the exit code was read
    p.info.status = 'exited';
    this.#records?.forget(p.info.pid);
    p.info.exit_code = code;
    if (code !== null && code > 128 && p.sent.has(code - 128)) p.info.signal = signalName(code - 128);
    p.stdinOpen = false;
    const end: ProcessEnd = { exit_code: code };
    if (p.info.signal) end.signal = p.info.signal;
    if (reason) end.reason = reason;
    for (const f of p.followers.values()) this.#end(f, end);
    p.followers.clear();
    this.#forgetOldExited(p.envId);
  }

  #end(f: Follower, end: ProcessEnd): void {
    this.#sendGap(f);
    this.#link.send(encodeOutput({ kind: 'end', follow: f.id, end }));
    this.#followers.delete(f.id);
  }

  #forgetOldExited(envId: string): void {
    const procs = this.#envs.get(envId);
    if (!procs) return;
    const exited = [...procs.values()].filter((p) => p.info.status === 'exited');
    for (const p of exited.slice(0, Math.max(0, exited.length - MAX_EXITED_PER_ENV)))
      procs.delete(p.info.pid);
  }

  /** Runs a control step of `pid` in its lane: after the ones before it, before the ones after. */
  control<T>(envId: string, pid: string, urgent: boolean, step: (hurry: Promise<void>) => Promise<T>) {
    return this.#lanes.run(`${envId}/${pid}`, urgent, step);
  }

  /** Resolves once the bytes left for the engine (or `hurry`: a signal came after them). */
  async input(envId: string, o: Payloads['proc.input'], hurry: Promise<void>): Promise<void> {
    const p = this.#get(envId, o.pid);
    if (!p.info.stdin) throw new Error(`${PROCESS_REFUSED}: ${o.pid} was started without stdin`);
    if (!p.stdinOpen) throw new Error(`${PROCESS_REFUSED}: the stdin of ${o.pid} is closed`);
    // Half-closing a terminal's connection would end its output too; envd refuses it the same way.
    if (o.close && p.info.tty)
      throw new Error(`${PROCESS_REFUSED}: a terminal's input does not close: send Ctrl-D (0x04) instead`);
    const data = Buffer.from(o.data, 'base64');
    if (data.length > MAX_STDIN_CHUNK)
      throw new Error(`${PROCESS_REFUSED}: an input chunk is at most ${MAX_STDIN_CHUNK} bytes`);
    if (o.close) p.stdinOpen = false;
    if (data.length) await written(p.stream, data, hurry);
    if (o.close) p.stream.end();
  }

  async signal(envId: string, o: Payloads['proc.signal']): Promise<void> {
    const p = this.#get(envId, o.pid);
    if (p.info.status !== 'running') throw new Error(`${PROCESS_REFUSED}: ${o.pid} has exited`);
    // The Engine API cannot signal an exec: its host pid (exec inspect) is signalled, as svcd runs
    // beside the engine (the same way a timed-out exec is killed).
    let pid = 0;
    try {
      pid = await this.#hostPid(p);
    } catch (err) {
      throw new DockerError(`signal ${o.pid}: ${dockerMessage(err)}`);
    }
    const number = constants.signals[`SIG${o.signal}` as keyof typeof constants.signals];
    if (!pid) throw new Error(`${PROCESS_REFUSED}: the engine reports no pid for ${o.pid}`);
    p.sent.add(number);
    try {
      if (p.task)
        await signalSandboxTask(p.task, number).catch(async (err) => {
          if ((await p.exec.inspect()).Running) throw err; // else it ended meanwhile, as ESRCH below
        });
      else process.kill(pid, number);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH')
        throw new Error(`signal ${o.pid}: ${(err as Error).message}`);
    }
  }

  async resize(envId: string, o: Payloads['proc.resize']): Promise<void> {
    const p = this.#get(envId, o.pid);
    if (!p.info.tty) throw new Error(`${PROCESS_REFUSED}: ${o.pid} has no terminal to resize`);
    if (p.info.status !== 'running') return;
    try {
      await p.exec.resize({ h: o.rows, w: o.cols });
    } catch (err) {
      throw new DockerError(`resize ${o.pid}: ${dockerMessage(err)}`);
    }
  }

  list(envId: string, pid: string): ProcessInfo[] {
    if (pid) return [{ ...this.#get(envId, pid).info }];
    return [...(this.#envs.get(envId)?.values() ?? [])].map((p) => ({ ...p.info }));
  }

  /** Replays what the ring holds after `since`, then follows; an exited process ends at once. */
  attach(envId: string, o: Payloads['proc.attach']): ProcessInfo {
    const p = this.#get(envId, o.pid);
    if (this.#followers.has(o.follow)) throw new Error(`${PROCESS_REFUSED}: follower ${o.follow} exists`);
    if (p.followers.size >= MAX_FOLLOWERS_PER_PROCESS)
      throw new Error(`${PROCESS_LIMIT}: ${MAX_FOLLOWERS_PER_PROCESS} followers of ${o.pid} already`);
    this.#flush(p);
    const f: Follower = { id: o.follow, gapFrom: 0, gapTo: 0 };
    const { gap, chunks } = p.ring.after(o.since);
    if (gap) {
      f.gapFrom = gap.from;
      f.gapTo = gap.to;
    }
    for (const c of chunks) this.#deliver(f, c);
    if (p.info.status === 'exited') {
      const end: ProcessEnd = { exit_code: p.info.exit_code ?? null };
      if (p.info.signal) end.signal = p.info.signal;
      this.#followers.set(f.id, p);
      this.#end(f, end);
    } else {
      p.followers.set(f.id, f);
      this.#followers.set(f.id, p);
    }
    return { ...p.info };
  }

  detach(follow: string): void {
    const p = this.#followers.get(follow);
    this.#followers.delete(follow);
    p?.followers.delete(follow);
  }

  /** The host stream dropped: its followers are the control plane's to re-attach, not ours. */
  dropFollowers(): void {
    for (const p of this.#followers.values()) p.followers.clear();
    this.#followers.clear();
  }
}

function signalName(n: number): string | undefined {
  for (const [name, v] of Object.entries(constants.signals)) if (v === n) return name.slice(3);
  return undefined;
}
