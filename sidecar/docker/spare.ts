// Spare execs: an Engine API exec started ahead of time in a container, a
// shell waiting for one command on stdin, so the exec that takes it skips Docker's exec create
// and runc's start (~55 ms here) and pays only a pipe write.
//
// - At most one per container, kept in this process's memory by container id. `env.exec` and
//   `proc.start` take the container's spare when one is ready, idle and not frozen (and, for a
//   live process, when it can run there: processes/on-spare.ts), else run a plain exec.
// - Made by `env.pause` for the environment's exec default service before it freezes the stack
//   (a warm-pool member holds one while paused), by `env.snapshot` for the first service (its
//   deployment's health command comes next), and again in the background after an exec or a
//   process used one, except after a container's first command: a sandbox that ran one command
//   may be dropped next (a rollout's create, exec, destroy), and a spare nobody takes costs a
//   whole exec (~50 ms of host CPU, a tenth of such a lifecycle). Its second command (a plain
//   exec) shows a loop: the next spare starts after it. Never on a create (idle sandboxes pay
//   no extra process).
// - A spare whose stream ended before use (container stopped or restarted, the shell killed) is
//   dropped; one that cannot start (no /bin/sh, an engine error, an environment the shell would
//   change) is simply no spare. Dropped on env.destroy and when the service's container changes.
// - Only the user's own commands use spares: `env.exec` (opting in through its exec options) and a live
//   process's start. Health checks, checkpoints and the verify / grader paths call execIn directly
//   and never take one (spare.test.ts checks it).
// - The spare runs with the container's default user, working directory and environment, as the
//   plain exec it replaces; the user can already run anything there (a live process's own
//   directory and variables are set by its line). Differences (spare-line.ts, docs/architecture.md
//   "Spare execs"): the command's stdin is an empty pipe, not /dev/null; a shebang-less executable
//   file is run by the shell where runc refuses it; the spare's shell shows in the container's
//   process list (a verify's record of the agent's processes included).
// - A command that never got GO never ran: the caller runs it the plain way, so nothing runs twice.
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { guard } from '../../shared/faults.ts';
import { ExecTimeout } from './errors.ts';
import { DEFAULT_MAX_OUTPUT, type ExecOptions, type ExecResult, finishExec, streamEnded } from './exec.ts';
import { Demuxer, TailBuffer } from './mux.ts';
import { GVISOR_DOCKER_RUNTIME } from './render.ts';
import { GO, NOGO, READY, restoreFor, SPARE_SCRIPT, spareLine } from './spare-line.ts';

/** Lines above this size go the plain way: the shell reads its line one byte at a time. */
export const MAX_SPARE_LINE = 64 * 1024;
/** How long env.pause waits for the spare to be ready before it freezes the stack anyway. */
export const SPARE_READY_WAIT_MS = 2000;

type State = 'starting' | 'ready' | 'taken' | 'dropped';

export class Spare {
  readonly id: string;
  readonly project: string;
  readonly service: string;
  state: State = 'starting';
  readonly ready: Promise<boolean>;
  #setReady!: (ok: boolean) => void;
  /** Settles when the spare is dropped unused. */
  readonly dropped: Promise<void>;
  #setDropped!: () => void;
  #exec: Docker.Exec | null = null;
  #stream: Duplex | null = null;
  #ended: Promise<void> = Promise.resolve();
  #restore = '';
  /** The container's config: its environment, default user and runtime (read as the spare starts). */
  #config: string[] = [];
  user = '';
  sandboxed = false;
  #went = false;
  #declined = false;
  /** A live process's output sink (launch); output before it is set is held for it. */
  #live: { sink: ((type: number, payload: Buffer) => void) | null; held: [number, Buffer][] } | null = null;
  #answered: (went: boolean) => void = () => {};
  /** The line declined before the command (NOGO): nothing ran, the spare is used up. */
  get declined(): boolean {
    return this.#declined;
  }
  /** The line ran: the command started (or Docker's refusal was given), so the spare is used up. */
  get went(): boolean {
    return this.#went;
  }
  #out = new TailBuffer(DEFAULT_MAX_OUTPUT);
  #errOut = new TailBuffer(DEFAULT_MAX_OUTPUT);
  readonly #onGone: (s: Spare) => void;

  constructor(id: string, project: string, service: string, onGone: (s: Spare) => void) {
    this.id = id;
    this.project = project;
    this.service = service;
    this.#onGone = onGone;
    this.ready = new Promise((resolve) => {
      this.#setReady = resolve;
    });
    this.dropped = new Promise((resolve) => {
      this.#setDropped = resolve;
    });
  }

  /** Starts the shell; `ready` says whether it came up. Never throws. */
  async start(docker: Docker): Promise<void> {
    try {
      const container = docker.getContainer(this.id);
      const info = await container.inspect();
      const restore = restoreFor(info.Config.Env ?? []);
      if (restore === null) return this.drop();
      this.#restore = restore;
      this.#config = info.Config.Env ?? [];
      this.user = info.Config.User ?? '';
      this.sandboxed = info.HostConfig.Runtime === GVISOR_DOCKER_RUNTIME;
      if (this.state !== 'starting') return;
      this.#exec = await container.exec({
        Cmd: ['/bin/sh', '-c', SPARE_SCRIPT],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: '',
      });
      const stream = (await this.#exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
      this.#stream = stream;
      const demux = new Demuxer((type, payload) => this.#output(type, payload));
      stream.on(
        'data',
        guard('spare exec: output', (chunk: Buffer) => demux.write(chunk)),
      );
      this.#ended = streamEnded(stream);
      this.#ended.then(
        () => this.#gone(),
        () => this.#gone(),
      );
      // Dropped while it started (env.destroy): the shell goes at once.
      if ((this.state as State) === 'dropped') stream.destroy();
    } catch {
      this.drop();
    }
  }

  /** The host pid of the spare's shell (0 before it started). */
  async pid(): Promise<number> {
    return this.#exec ? ((await this.#exec.inspect()).Pid ?? 0) : 0;
  }

  /** The exec, its stream and the end of that stream, for the live process it became (launch). */
  get exec(): Docker.Exec | null {
    return this.#exec;
  }
  get stream(): Duplex | null {
    return this.#stream;
  }
  get ended(): Promise<void> {
    return this.#ended;
  }

  #output(type: number, payload: Buffer): void {
    if (this.state === 'taken') {
      // GO is the first byte on stdout; stderr is another pipe, so the command's first
      // stderr bytes may come before it.
      if (type !== 2 && !this.#went && !this.#declined && payload.length) {
        if (payload[0] === NOGO) {
          this.#declined = true;
          this.#answered(false);
          return;
        }
        this.#went = true;
        this.#answered(true);
        if (payload[0] === GO) payload = payload.subarray(1);
      }
      if (!payload.length) return;
      if (this.#live) {
        if (this.#live.sink) this.#live.sink(type, payload);
        else this.#live.held.push([type, payload]);
      } else (type === 2 ? this.#errOut : this.#out).push(payload);
      return;
    }
    // Before use only the ready byte is expected; anything else (Docker refusing /bin/sh, a
    // shell that is not one) means no spare.
    if (this.state === 'starting' && type === 1 && payload.length === 1 && payload[0] === READY) {
      this.state = 'ready';
      this.#setReady(true);
      return;
    }
    this.drop();
  }

  #gone(): void {
    if (this.state !== 'taken') this.drop();
  }

  /** Ends the spare: its shell reads end of input and exits. */
  drop(): void {
    if (this.state === 'taken' || this.state === 'dropped') return;
    this.state = 'dropped';
    this.#setReady(false);
    this.#stream?.destroy();
    this.#onGone(this);
    this.#setDropped();
  }

  /**
   * Runs `argv` as this exec's process. Null when the line never ran (the spare died first):
   * nothing of the command ran, so the caller runs it the plain way.
   */
  async run(service: string, argv: string[], opts: ExecOptions): Promise<ExecResult | null> {
    const exec = this.#exec;
    const stream = this.#stream;
    if (!exec || !stream) return null;
    const max = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    this.#out = new TailBuffer(max);
    this.#errOut = new TailBuffer(max);
    try {
      stream.write(spareLine(argv, this.#restore));
      stream.end(); // the command reads end of input, as with a plain exec's absent stdin
    } catch {
      return this.#lost();
    }
    // Its task in gVisor is the spare's shell, or what the line exec'd.
    const ran = {
      exec,
      service,
      cmd: ['/bin/sh', ...argv],
      stream,
      ended: this.#ended,
      out: this.#out,
      errOut: this.#errOut,
    };
    try {
      const result = await finishExec(ran, opts.timeoutSec ?? 120);
      return this.#went ? result : this.#lost();
    } catch (err) {
      // The stream failed before the line ran: nothing ran. A timeout is the command's (or a
      // shell frozen from outside, now killed): never run it a second time.
      if (!this.#went && !(err instanceof ExecTimeout)) return this.#lost();
      throw err;
    }
  }

  /**
   * Hands the spare a live process's line (processes/on-spare.ts): the exec becomes the process.
   * Resolves true once GO came (the command started, or Docker's refusal of it was printed), false
   * when nothing ran: the line declined (NOGO) or the spare died first, and the caller starts the
   * process the plain way. Past `waitMs` without an answer (a shell that cannot be scheduled) it
   * resolves true: the line may run, so the process is this exec whatever it does, never a second
   * start. Without `stdin` the command reads end of input, as with a plain exec's absent stdin.
   */
  async launch(line: string, stdin: boolean, waitMs: number): Promise<boolean> {
    const stream = this.#stream;
    if (!this.#exec || !stream) return false;
    this.#live = { sink: null, held: [] };
    const answer = new Promise<boolean>((resolve) => {
      this.#answered = resolve;
    });
    try {
      stream.write(line);
      if (!stdin) stream.end();
    } catch {
      this.#lost();
      return false;
    }
    let timer: NodeJS.Timeout | undefined;
    const went = await Promise.race([
      answer,
      this.#ended.then(
        () => this.#went,
        () => this.#went,
      ),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(
          guard('spare exec: waiting for its line', () => resolve(true)),
          waitMs,
        );
      }),
    ]);
    clearTimeout(timer);
    if (!went) this.#lost();
    return went;
  }

  /** Where a launched spare's output goes (type 1 stdout, 2 stderr); what came before is given first. */
  pipe(sink: (type: number, payload: Buffer) => void): void {
    const live = this.#live;
    if (!live) return;
    live.sink = sink;
    for (const [type, payload] of live.held.splice(0)) sink(type, payload);
  }

  /** The restore part of a line for a command with `env` of its own; null when the shell cannot give it. */
  restoreWith(env: Record<string, string>): string | null {
    const own = Object.entries(env);
    return own.length ? restoreFor([...this.#config, ...own.map(([k, v]) => `${k}=${v}`)]) : this.#restore;
  }

  /** The spare died before its line ran: it counts as dropped. */
  #lost(): null {
    this.state = 'dropped';
    this.#stream?.destroy();
    this.#setDropped();
    return null;
  }
}
