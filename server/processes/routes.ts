// Live processes over HTTP (spec "Live processes"): start, list, one, input, signal, and the
// output stream as Server-Sent Events. The same stream as a WebSocket is ws.ts (an upgrade never
// reaches Fastify). Every record and body is declared in protocol/api.ts.
import { PassThrough } from 'node:stream';
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import {
  ProcessInputRequest,
  ProcessSignalRequest,
  ProcessStartRequest,
  ProcessStreamQuery,
} from '../../protocol/api.ts';
import type { AppContext } from '../context.ts';
import type { App } from '../http/app.ts';
import { SECURED } from '../http/schema.ts';
import type { Caller } from '../identity/auth.ts';
import {
  followProcess,
  getProcess,
  inputProcess,
  listProcesses,
  signalProcess,
  startProcess,
} from './processes.ts';
import { FollowerSink } from './sink.ts';

const tags = ['processes'];
const Id = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_-]+$' });
const EnvParams = Type.Object({ env: Type.String({ minLength: 1, maxLength: 100 }) });
const PidParams = Type.Object({ env: Type.String({ minLength: 1, maxLength: 100 }), pid: Id });
/** A comment line this often keeps proxies from closing a quiet stream. */
export const SSE_HEARTBEAT_MS = 15_000;

/** A follower on a Server-Sent Events response: each event one `data:` line. */
export class SseSink extends FollowerSink {
  readonly out = new PassThrough();
  #beat: NodeJS.Timeout;

  constructor() {
    super();
    this.out.on('error', () => {});
    this.out.on('drain', () => this.drained());
    // Headers go out with the first bytes: a stream with nothing to replay must not wait for output.
    this.out.write(': attached\n\n');
    this.#beat = setInterval(() => {
      if (!this.ended) this.out.write(': heartbeat\n\n');
    }, SSE_HEARTBEAT_MS);
    this.#beat.unref();
  }
  protected buffered(): number {
    return this.out.writableLength + this.out.readableLength;
  }
  protected send(json: string): void {
    this.out.write(`data: ${json}\n\n`);
  }
  protected finish(): void {
    clearInterval(this.#beat);
    this.out.end();
  }
}

export function processRoutes(app: App, ctx: AppContext): void {
  app.post(
    '/v1/envs/:env/processes',
    {
      schema: {
        tags,
        summary: 'Start a process in a service; it runs until it exits or is signalled',
        security: SECURED,
        params: EnvParams,
        body: ProcessStartRequest,
      },
    },
    async (req, reply) => reply.code(202).send(await startProcess(ctx, req.caller, req.params.env, req.body)),
  );

  app.get(
    '/v1/envs/:env/processes',
    {
      schema: {
        tags,
        summary: "The environment's processes, running and recently exited",
        security: SECURED,
        params: EnvParams,
      },
    },
    async (req) => ({ processes: await listProcesses(ctx, req.caller, req.params.env) }),
  );

  app.get(
    '/v1/envs/:env/processes/:pid',
    { schema: { tags, summary: 'One process', security: SECURED, params: PidParams } },
    async (req) => getProcess(ctx, req.caller, req.params.env, req.params.pid),
  );

  /** A POST to one process that answers 204 once the host did it. */
  const action = <B extends TSchema>(
    verb: string,
    summary: string,
    body: B,
    run: (caller: Caller, env: string, pid: string, body: Static<B>) => Promise<void>,
  ) =>
    app.post(
      `/v1/envs/:env/processes/:pid/${verb}`,
      { schema: { tags, summary, security: SECURED, params: PidParams, body } },
      async (req, reply) => {
        await run(req.caller, req.params.env, req.params.pid, req.body as Static<B>);
        return reply.code(204).send();
      },
    );
  action('input', "Write to a process's stdin (base64), or close it", ProcessInputRequest, (c, e, p, b) =>
    inputProcess(ctx, c, e, p, b),
  );
  action('signal', 'Send a signal to a process', ProcessSignalRequest, (c, e, p, b) =>
    signalProcess(ctx, c, e, p, b),
  );

  app.get(
    '/v1/envs/:env/processes/:pid/stream',
    {
      exposeHeadRoute: false,
      schema: {
        tags,
        summary: "A process's output as Server-Sent Events (or a WebSocket upgrade)",
        description:
          'text/event-stream; each `data:` is one JSON object: `{type: "stdout"|"stderr", seq, data}` ' +
          '(data base64), `{type: "gap", from, to}` (output lost to the bounds), then one ' +
          '`{type: "end", exit_code, signal?, reason?}`. `since` replays what the host still holds after that seq. ' +
          'As a WebSocket upgrade the same objects are text frames, and the client may send ' +
          '`{type: "input", data}`, `{type: "close_stdin"}`, `{type: "resize", rows, cols}`, `{type: "signal", signal}`. ' +
          'A browser, which cannot set headers on a WebSocket, offers the credential as subprotocols instead: ' +
          '`svc.v1`, `svc.bearer.<session or key>` and optionally `svc.team.<team id>`; the server selects `svc.v1`.',
        security: SECURED,
        params: PidParams,
        querystring: ProcessStreamQuery,
      },
    },
    async (req, reply) => {
      const sink = new SseSink();
      // The client going away closes the response: the host stops sending to it.
      reply.raw.once('close', () => sink.close());
      await followProcess(
        ctx,
        req.caller,
        req.params.env,
        req.params.pid,
        Number(req.query.since ?? 0),
        sink,
      ).catch((err) => {
        sink.close();
        throw err;
      });
      reply
        .header('cache-control', 'no-store')
        .header('x-accel-buffering', 'no')
        .type('text/event-stream; charset=utf-8');
      return reply.send(sink.out);
    },
  );
}
