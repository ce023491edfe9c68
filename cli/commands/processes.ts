// Live processes: `shell` (an interactive terminal in a service), `ps` (the environment's
// processes) and `kill` (a signal to one). `exec -i/-t` (files.ts) attaches through the same path.
import { SIGNALS, type SignalName } from '../../protocol/processes.ts';
import type { EnvSpec } from '../../protocol/spec.ts';
import type { ApiAnswer, ApiBody } from '../api-types.ts';
import type { Command, FlagSpec, RunContext } from '../command.ts';
import { CliError, UsageError } from '../errors.ts';
import { attach, localSize } from '../live.ts';

export const SERVICE_OPTIONAL: FlagSpec = {
  name: 'service',
  type: 'string',
  value: 'S',
  help: "Service name (default: the environment's agent service, or its only service)",
};

export const JSON_FLAG: FlagSpec = { name: 'json', type: 'boolean', help: 'Print the JSON answer' };

/** `--service`, else the agent service of the current version, else its only service. */
export async function serviceOf(ctx: RunContext, env: string): Promise<string> {
  if (typeof ctx.flags.service === 'string') return ctx.flags.service;
  const client = ctx.client();
  const { environment } = await client.call('get', '/v1/envs/{env}', { path: { env } });
  const { versions } = await client.call('get', '/v1/envs/{env}/versions', { path: { env } });
  // The OpenAPI leaves a version's Spec an open object; its shape is protocol/spec.ts's EnvSpec.
  const spec = versions.find((v) => v.ID === environment.CurrentVersionID)?.Spec as EnvSpec | undefined;
  if (!spec) throw new CliError(`environment ${env} has no current version yet: name a --service`);
  if (spec.agent?.service) return spec.agent.service;
  const names = (spec.services ?? []).map((s) => s.name);
  if (names.length === 1) return names[0];
  throw new CliError(`environment ${env} has services ${names.join(', ')}: name one with --service`);
}

export interface LiveStart {
  service: string;
  cmd: string[];
  stdin: boolean;
  tty: boolean;
}

/** Starts a process and follows it to its end; returns the exit code svc passes on. */
export async function runLive(ctx: RunContext, env: string, o: LiveStart): Promise<number> {
  const client = ctx.client();
  const body: ApiBody<'post', '/v1/envs/{env}/processes'> = {
    service: o.service,
    cmd: o.cmd,
    stdin: o.stdin,
  };
  if (o.tty) body.tty = localSize();
  const { pid } = await client.call('post', '/v1/envs/{env}/processes', { path: { env }, json: body });
  return attach({ client, env, pid, tty: o.tty, stdin: o.stdin });
}

export const shell: Command = {
  words: ['shell'],
  summary: "Open an interactive terminal in a service; exits with the shell's exit code",
  details:
    'Starts `sh` (or --cmd) with a terminal of the local size, attached over a WebSocket: the local\n' +
    'terminal is in raw mode meanwhile (Ctrl-C goes to the remote shell), a resize is passed on, and\n' +
    'the terminal is restored however svc ends. A signal sent to svc is passed to the process; a\n' +
    'second one (or SIGHUP) detaches, leaving the process to svc ps / svc kill. A dropped stream is\n' +
    're-attached without losing what the server still holds; lost output shows as a [svc: …] line.',
  flags: [
    SERVICE_OPTIONAL,
    { name: 'cmd', type: 'string', value: 'PROG', default: 'sh', help: 'The program to run' },
  ],
  positionals: [{ name: 'env' }],
  async run(ctx) {
    const env = ctx.args[0];
    const service = await serviceOf(ctx, env);
    return runLive(ctx, env, { service, cmd: [String(ctx.flags.cmd)], stdin: true, tty: true });
  },
};

const cell = (s: string, width: number) => (s.length > width ? `${s.slice(0, width - 1)}…` : s.padEnd(width));

/** `ps`'s table: one row per process, the command last and clipped to one line. */
type ProcessRecord = ApiAnswer<'get', '/v1/envs/{env}/processes'>['processes'][number];

export function processTable(processes: ProcessRecord[]): string {
  const head = ['PID', 'SERVICE', 'STATUS', 'EXIT', 'STARTED', 'COMMAND'];
  const rows = processes.map((p) => [
    p.pid,
    p.service,
    p.status,
    p.status === 'running' ? '' : p.signal ? `SIG${p.signal}` : String(p.exit_code ?? ''),
    p.started_at.replace(/\.\d+Z$/, 'Z'),
    p.cmd.join(' ').replace(/\s+/g, ' '),
  ]);
  const widths = head
    .slice(0, -1)
    .map((h, i) => Math.min(40, Math.max(h.length, ...rows.map((r) => r[i].length))));
  const line = (r: string[]) =>
    [...r.slice(0, -1).map((c, i) => cell(c, widths[i])), cell(r.at(-1) ?? '', 80)].join('  ').trimEnd();
  return `${[head, ...rows].map(line).join('\n')}\n`;
}

export const ps: Command = {
  words: ['ps'],
  summary: "List an environment's processes, running and recently exited (GET /v1/envs/{env}/processes)",
  flags: [JSON_FLAG],
  positionals: [{ name: 'env' }],
  async run(ctx) {
    const r = await ctx.client().call('get', '/v1/envs/{env}/processes', { path: { env: ctx.args[0] } });
    if (ctx.flags.json === true) ctx.io.json(r);
    else if (r.processes.length === 0) ctx.io.out('no processes\n');
    else ctx.io.out(processTable(r.processes));
    return 0;
  },
};

/** `TERM`, `term`, `SIGTERM` or a number among the names the server takes. */
export function signalName(raw: string): SignalName | null {
  const name = raw.toUpperCase().replace(/^SIG/, '') as SignalName;
  return SIGNALS.includes(name) ? name : null;
}

export const kill: Command = {
  words: ['kill'],
  summary: 'Send a signal to a process (POST /v1/envs/{env}/processes/{pid}/signal)',
  details: `Signals: ${SIGNALS.join(', ')} (with or without SIG, any case).`,
  flags: [{ name: 'signal', short: 's', type: 'string', value: 'SIG', default: 'TERM', help: 'The signal' }],
  positionals: [{ name: 'env' }, { name: 'pid' }],
  async run(ctx) {
    const [env, pid] = ctx.args;
    const signal = signalName(String(ctx.flags.signal));
    if (!signal) throw new UsageError(`unknown signal '${ctx.flags.signal}' (${SIGNALS.join(', ')})`, kill);
    await ctx
      .client()
      .call('post', '/v1/envs/{env}/processes/{pid}/signal', { path: { env, pid }, json: { signal } });
    return 0;
  },
};
