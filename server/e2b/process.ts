// envd's `process.Process` Connect-RPC service over svc's live processes (server/processes), in
// the sandbox's agent service. envd numbers processes (uint32 pids) where svc names them (`proc_…`):
// each sandbox's numbers are in the database (pids.ts), with the tags and configs callers gave, so
// any replica finds them. Output streams as
// the host sends it; a call's Connect-Timeout-Ms ends the process when it runs out, as envd does; a
// stream ends at once when its sandbox does. Background processes outlive the call that started them.
import type { HandlerContext } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ProcessEnd } from '../../protocol/processes.ts';
import type { AppContext } from '../context.ts';
import {
  followProcess,
  inputProcess,
  listProcesses,
  resizeProcess,
  signalProcess,
  startProcess,
} from '../processes/processes.ts';
import { FollowerSink } from '../processes/sink.ts';
import { type Known, ProcessNumbers, type Selector } from './pids.ts';
import { callSignal, rpcCall, sandboxOf } from './rpc-context.ts';
import type { E2bSandboxRow } from './store.ts';
import { resolvePath, sandboxTarget, userOf } from './target.ts';

/** Keepalive events while a stream is quiet: the SDK's Keepalive-Ping-Interval, within these bounds (s). */
const KEEPALIVE_SEC = { min: 5, max: 60, default: 50 };
/** envd's signal numbers. */
const SIGNALS: Record<number, 'TERM' | 'KILL'> = { 15: 'TERM', 9: 'KILL' };

type Event =
  | { case: 'start'; value: { pid: number } }
  | { case: 'data'; value: { output: { case: 'stdout' | 'stderr' | 'pty'; value: Uint8Array } } }
  | { case: 'end'; value: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { case: 'keepalive'; value: object };

/** A follower whose events a Connect stream takes one at a time. */
class QueueSink extends FollowerSink {
  readonly events: Event[] = [];
  #bytes = 0;
  #wake: () => void = () => {};
  readonly tty: boolean;
  constructor(tty: boolean) {
    super();
    this.tty = tty;
  }
  protected buffered(): number {
    return this.#bytes;
  }
  protected send(json: string): void {
    const e = JSON.parse(json) as
      | { type: 'stdout' | 'stderr'; data: string }
      | { type: 'gap'; from: number; to: number }
      | ({ type: 'end' } & ProcessEnd);
    if (e.type === 'stdout' || e.type === 'stderr') {
      const value = Buffer.from(e.data, 'base64');
      this.#bytes += value.length;
      this.events.push({ case: 'data', value: { output: { case: this.tty ? 'pty' : e.type, value } } });
    } else if (e.type === 'gap') {
      const value = Buffer.from(`\n[svc: output cut: chunks ${e.from} to ${e.to} were not kept]\n`);
      this.events.push({ case: 'data', value: { output: { case: this.tty ? 'pty' : 'stderr', value } } });
    } else if (e.type === 'end') this.events.push({ case: 'end', value: endEvent(e) });
    this.#wake();
  }
  protected finish(): void {
    this.#wake();
  }
  take(): Event | undefined {
    const e = this.events.shift();
    if (e?.case === 'data') this.#bytes -= e.value.output.value.length;
    return e;
  }
  /** Resolves when an event arrives, the sink ends, `ms` pass, or `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.events.length || this.ended || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        this.#wake = () => {};
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
      this.#wake = done;
    });
  }
}

function endEvent(e: ProcessEnd) {
  const exited = e.exit_code !== null;
  const status = e.signal ? `signal: ${e.signal.toLowerCase()}` : `exit status ${e.exit_code ?? -1}`;
  return { exitCode: e.exit_code ?? -1, exited, status, ...(e.reason ? { error: e.reason } : {}) };
}

function keepaliveMs(c: HandlerContext): number {
  const asked = Number(c.requestHeader.get('keepalive-ping-interval') ?? KEEPALIVE_SEC.default);
  const sec = Number.isFinite(asked) ? asked : KEEPALIVE_SEC.default;
  return Math.min(Math.max(sec, KEEPALIVE_SEC.min), KEEPALIVE_SEC.max) * 1000;
}

/** The service's implementation for one control plane (each sandbox's pid table lives here). */
export function processService(ctx: AppContext) {
  const numbers = new ProcessNumbers(ctx.db);
  const find = (row: E2bSandboxRow, sel: Selector | undefined) => numbers.find(row.id, sel);

  /** Follows `k` as a Connect stream: start, output as it comes, end; keepalives while quiet. */
  async function* follow(
    c: HandlerContext,
    row: E2bSandboxRow,
    pid: number,
    k: Known,
    deadlineKill: boolean,
  ) {
    const t = await rpcCall(() => sandboxTarget(ctx, row));
    const sink = new QueueSink(k.tty);
    const signal = callSignal(c);
    // envd ends a process whose call's deadline passes (the SDK's default is 60 s), whether or not
    // the client is still there to see it: the timer outlives this stream unless the process ended.
    const timeout = c.timeoutMs();
    const kill =
      deadlineKill && timeout !== undefined && timeout > 0
        ? setTimeout(() => {
            signalProcess(ctx, t.caller, t.envId, k.proc, { signal: 'KILL' }).catch(() => {});
          }, timeout)
        : undefined;
    kill?.unref();
    let exited = false;
    try {
      await rpcCall(() => followProcess(ctx, t.caller, t.envId, k.proc, 0, sink));
      yield { event: { event: { case: 'start' as const, value: { pid } } } };
      const every = keepaliveMs(c);
      for (;;) {
        const e = sink.take();
        if (e) {
          if (e.case === 'end') exited = true;
          yield { event: { event: e } };
          if (exited) return;
          continue;
        }
        if (signal.aborted)
          throw signal.reason instanceof ConnectError
            ? signal.reason
            : new ConnectError('cancelled', Code.Canceled);
        if (sink.ended) return;
        await sink.wait(every, signal);
        if (!sink.events.length && !sink.ended && !signal.aborted)
          yield { event: { event: { case: 'keepalive' as const, value: {} } } };
      }
    } finally {
      sink.close();
      if (exited) clearTimeout(kill);
    }
  }

  const impl = {
    start: async function* (
      req: {
        process?: Known['config'];
        pty?: { size?: { rows: number; cols: number } };
        tag?: string;
        stdin?: boolean;
      },
      c: HandlerContext,
    ) {
      const row = sandboxOf(c);
      const p = req.process;
      if (!p?.cmd) throw new ConnectError('process.cmd is required', Code.InvalidArgument);
      const user = userOf(undefined, c.requestHeader.get('authorization') ?? undefined);
      const tty = req.pty?.size
        ? { rows: req.pty.size.rows || 24, cols: req.pty.size.cols || 80 }
        : undefined;
      const t = await rpcCall(() => sandboxTarget(ctx, row));
      const started = await rpcCall(() =>
        startProcess(ctx, t.caller, t.envId, {
          service: t.service,
          cmd: [p.cmd, ...p.args],
          env: p.envs,
          ...(p.cwd ? { cwd: resolvePath(p.cwd, user) } : {}),
          ...(user ? { user } : {}),
          stdin: req.stdin ?? Boolean(tty),
          ...(tty ? { tty } : {}),
        }),
      );
      const k: Known = { proc: started.pid, tag: req.tag, config: p, tty: Boolean(tty) };
      const pid = await numbers.add(row.id, k);
      yield* follow(c, row, pid, k, true);
    },
    connect: async function* (req: { process?: Selector }, c: HandlerContext) {
      const row = sandboxOf(c);
      const { pid, k } = await find(row, req.process);
      yield* follow(c, row, pid, k, false);
    },
    list: async (_req: unknown, c: HandlerContext) => {
      const row = sandboxOf(c);
      const t = await rpcCall(() => sandboxTarget(ctx, row));
      const running = (await rpcCall(() => listProcesses(ctx, t.caller, t.envId))).filter(
        (p) => p.status === 'running',
      );
      const listed = await numbers.numbered(row.id, running);
      return {
        processes: listed.map(({ pid, k }) => ({ config: k.config, pid, ...(k.tag ? { tag: k.tag } : {}) })),
      };
    },
    sendInput: async (
      req: {
        process?: Selector;
        input?: { input: { case: 'stdin' | 'pty'; value: Uint8Array } | { case: undefined } };
      },
      c: HandlerContext,
    ) => {
      await input(c, req.process, req.input?.input);
      return {};
    },
    streamInput: async (
      reqs: AsyncIterable<{
        event:
          | { case: 'start'; value: { process?: Selector } }
          | {
              case: 'data';
              value: {
                input?: { input: { case: 'stdin' | 'pty'; value: Uint8Array } | { case: undefined } };
              };
            }
          | { case: 'keepalive' | undefined };
      }>,
      c: HandlerContext,
    ) => {
      let sel: Selector | undefined;
      for await (const r of reqs) {
        if (r.event.case === 'start') sel = r.event.value.process;
        else if (r.event.case === 'data') {
          if (!sel)
            throw new ConnectError('StreamInput: the start event must come first', Code.InvalidArgument);
          await input(c, sel, r.event.value.input?.input);
        }
      }
      return {};
    },
    sendSignal: async (req: { process?: Selector; signal: number }, c: HandlerContext) => {
      const row = sandboxOf(c);
      const { k } = await find(row, req.process);
      const name = SIGNALS[req.signal];
      if (!name)
        throw new ConnectError(`signal ${req.signal} is not one of SIGTERM, SIGKILL`, Code.InvalidArgument);
      const t = await rpcCall(() => sandboxTarget(ctx, row));
      await rpcCall(() => signalProcess(ctx, t.caller, t.envId, k.proc, { signal: name }));
      return {};
    },
    closeStdin: async (req: { process?: Selector }, c: HandlerContext) => {
      const row = sandboxOf(c);
      const { k } = await find(row, req.process);
      const t = await rpcCall(() => sandboxTarget(ctx, row));
      await rpcCall(() => inputProcess(ctx, t.caller, t.envId, k.proc, { close: true }));
      return {};
    },
    update: async (
      req: { process?: Selector; pty?: { size?: { rows: number; cols: number } } },
      c: HandlerContext,
    ) => {
      const row = sandboxOf(c);
      const { k } = await find(row, req.process);
      const size = req.pty?.size;
      if (!size) return {};
      const t = await rpcCall(() => sandboxTarget(ctx, row));
      await rpcCall(() =>
        resizeProcess(ctx, t.caller, t.envId, k.proc, { rows: size.rows, cols: size.cols }),
      );
      return {};
    },
  };

  async function input(
    c: HandlerContext,
    sel: Selector | undefined,
    data: { case: 'stdin' | 'pty'; value: Uint8Array } | { case: undefined } | undefined,
  ): Promise<void> {
    const row = sandboxOf(c);
    const { k } = await find(row, sel);
    if (!data?.case || data.value.length === 0) return;
    const t = await rpcCall(() => sandboxTarget(ctx, row));
    const b64 = Buffer.from(data.value).toString('base64');
    await rpcCall(() => inputProcess(ctx, t.caller, t.envId, k.proc, { data: b64 }));
  }

  return { impl };
}
