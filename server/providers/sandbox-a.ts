// sandbox-a: E2B's public API (corpus: e2b__infra__spec__openapi.yml, envd.yaml; process.proto and
// the JS SDK for what the OpenAPI leaves out). Control plane with `X-API-Key`; in-sandbox calls go
// to envd: process `Start` over Connect-RPC, files over `/files`, with `X-Access-Token`.
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { Egress, ServiceRecord } from '../../protocol/spec.ts';
import {
  BACKGROUND,
  type Created,
  type ExecResult,
  type ProviderCloud,
  type SandboxProvider,
  serviceArgv,
} from './driver-host.ts';
import { ProcessService, Signal } from './envd-process.ts';
import { call, joinUrl, LIMITS, ProviderError } from './http.ts';
import type { ProviderState } from './state-store.ts';

const NAME = 'sandbox-a';
export const ENVD_PORT = 49983;
/** Sandbox time to live asked for at create and resume (the provider's default is 15 s). */
export const SANDBOX_TTL_SEC = 3600;
/** Domains where the SDK routes through `sandbox.<domain>` with headers instead of per-sandbox hosts. */
const ROUTED_DOMAINS = ['e2b.app', 'e2b.dev', 'e2b.pro', 'e2b-staging.dev'];
const MAX_OUTPUT = 4 * 1024 * 1024;
export const TIMEOUT_EXIT_CODE = 124;

interface Sandbox {
  sandboxID: string;
  templateID: string;
  envdAccessToken?: string;
  domain?: string | null;
}

const api = (c: ProviderCloud) => ({ 'X-API-Key': c.config.token });

/**
 * A sandbox lives SANDBOX_TTL_SEC after its last extension and is then auto-paused (created with
 * autoPause), not killed. Before an in-sandbox call, a sandbox not extended for `everyMs` is
 * connected again, which resumes it if paused and extends its TTL. In memory: after a control
 * plane restart the first call extends.
 */
export const KEEPALIVE = { everyMs: 10 * 60_000 };

/**
 * When this driver last extended each sandbox. Each control plane (each replica) keeps its own:
 * one that has not extended a sandbox yet does so at its first call, so none is ever let lapse.
 */
class Extensions {
  readonly #at = new Map<string, number>();

  mark(ref: string): void {
    this.#at.set(ref, Date.now());
  }

  forget(ref: string): void {
    this.#at.delete(ref);
  }

  async keepAlive(c: ProviderCloud, st: ProviderState): Promise<void> {
    if (Date.now() - (this.#at.get(st.ref) ?? 0) < KEEPALIVE.everyMs) return;
    await call(NAME, joinUrl(c.api, `/sandboxes/${encodeURIComponent(st.ref)}/connect`), {
      method: 'POST',
      headers: api(c),
      body: { timeout: SANDBOX_TTL_SEC },
    });
    this.mark(st.ref);
  }
}

/** envd's base address and headers for one sandbox (the SDK's routing; `envd_url` forces it). */
export function envdRoute(
  c: ProviderCloud,
  st: ProviderState,
): { base: string; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  if (st.data.token) headers['X-Access-Token'] = st.data.token;
  // envd picks the OS user from Basic auth with an empty password, as the SDK sends it.
  headers.Authorization = `Basic ${Buffer.from(`${st.data.user || 'root'}:`).toString('base64')}`;
  const routed = { 'E2b-Sandbox-Id': st.ref, 'E2b-Sandbox-Port': String(ENVD_PORT) };
  if (c.config.envd_url) return { base: c.config.envd_url, headers: { ...headers, ...routed } };
  const domain = st.data.domain || 'e2b.app';
  if (ROUTED_DOMAINS.includes(domain))
    return { base: `https://sandbox.${domain}`, headers: { ...headers, ...routed } };
  return { base: `https://${ENVD_PORT}-${st.ref}.${domain}`, headers };
}

async function run(
  c: ProviderCloud,
  st: ProviderState,
  argv: string[],
  timeoutSec: number,
): Promise<ExecResult> {
  const { base, headers } = envdRoute(c, st);
  const transport = createConnectTransport({ baseUrl: base, httpVersion: '1.1' });
  const client = createClient(ProcessService, transport);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let sizes = [0, 0];
  let end: { exitCode: number; error?: string; status: string } | null = null;
  let pid = 0;
  try {
    const stream = client.start(
      { process: { cmd: argv[0], args: argv.slice(1), envs: {} } },
      { headers: { ...headers, 'Keepalive-Ping-Interval': '50' }, timeoutMs: timeoutSec * 1000 },
    );
    for await (const res of stream) {
      const ev = res.event?.event;
      if (ev?.case === 'start') pid = ev.value.pid;
      else if (ev?.case === 'data' && ev.value.output.case) {
        const i = ev.value.output.case === 'stderr' ? 1 : 0;
        const chunk = Buffer.from(ev.value.output.value);
        (i ? err : out).push(chunk);
        sizes[i] += chunk.length;
        sizes = sizes.map((n, k) => trim(k ? err : out, n));
      } else if (ev?.case === 'end') end = ev.value;
    }
  } catch (e) {
    // Like the sidecar (and timeout(1)): the command ran, its partial output comes back with 124.
    if (e instanceof ConnectError && e.code === Code.DeadlineExceeded) {
      const partial = Buffer.concat(err).toString('utf8');
      const killed = pid
        ? await client
            .sendSignal(
              { process: { selector: { case: 'pid', value: pid } }, signal: Signal.SIGKILL },
              { headers, timeoutMs: 10_000 },
            )
            .then(
              () => 'and was killed',
              (k) => `and could not be killed: ${(k as Error).message}`,
            )
        : 'before the process started';
      const note = `svc: command timed out after ${timeoutSec} s ${killed}`;
      return {
        exit_code: TIMEOUT_EXIT_CODE,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: `${partial}${partial ? '\n' : ''}${note}`,
      };
    }
    const m = (e as Error).message.replace(/^\[([a-z_]+)\] /, '$1: ');
    throw new ProviderError(`${NAME}: process.Process/Start: ${m}`, 0);
  }
  if (!end)
    throw new ProviderError(`${NAME}: process.Process/Start: the stream ended without an end event`, 0);
  const stderr = Buffer.concat(err).toString('utf8');
  // envd reports a command it could not start as an end event with an error and no exit.
  return {
    exit_code: end.exitCode,
    stdout: Buffer.concat(out).toString('utf8'),
    stderr: end.error && !stderr ? end.error : stderr,
  };
}

/** Keeps the tail of an output stream under MAX_OUTPUT; returns the new size. */
function trim(chunks: Buffer[], size: number): number {
  let n = size;
  while (n > MAX_OUTPUT && chunks.length > 1) n -= (chunks.shift() as Buffer).length;
  return n;
}

function sandboxState(s: Sandbox, user: string): Record<string, string> {
  return { token: s.envdAccessToken ?? '', domain: s.domain ?? '', user, template: s.templateID };
}

/** The sandbox-a driver; each application context makes its own (see Extensions). */
export function sandboxA(): SandboxProvider {
  const extended = new Extensions();
  const provider: SandboxProvider = {
    name: NAME,

    async check(c) {
      const r = await call(NAME, joinUrl(c.api, '/sandboxes'), { headers: api(c) });
      const list = r.json<unknown[]>();
      return { api_url: c.api, sandboxes: Array.isArray(list) ? list.length : 0 };
    },

    async create(c, envId, s: ServiceRecord, egress: Egress): Promise<Created> {
      const r = await call(NAME, joinUrl(c.api, '/sandboxes'), {
        method: 'POST',
        headers: api(c),
        body: {
          templateID: s.image,
          timeout: SANDBOX_TTL_SEC,
          envVars: s.env,
          metadata: { svc_env: envId },
          secure: true,
          allow_internet_access: egress === 'allow',
          autoPause: true,
        },
      });
      const sb = r.json<Sandbox>();
      if (typeof sb?.sandboxID !== 'string' || !sb.sandboxID)
        throw new ProviderError(`${NAME}: POST /sandboxes: answer has no sandboxID`, r.status);
      extended.mark(sb.sandboxID);
      const user = /^[a-z_][a-z0-9_-]*$/.test(s.user) ? s.user : 'root';
      const st = { ref: sb.sandboxID, data: sandboxState(sb, user) } as ProviderState;
      const argv = serviceArgv(s);
      if (argv) {
        // Started detached so the sandbox keeps it running; only its launch is awaited here.
        const bg = ['/bin/sh', '-c', BACKGROUND, 'svc-command', ...argv];
        const started = await run(c, st, bg, 60).catch(async (err) => {
          await provider.destroy(c, st).catch(() => {});
          throw err;
        });
        if (started.exit_code !== 0) {
          await provider.destroy(c, st).catch(() => {});
          throw new Error(
            `${NAME}: the service command did not start: ${started.stderr.trim() || started.exit_code}`,
          );
        }
      }
      return {
        ref: sb.sandboxID,
        data: st.data,
        egress:
          egress === 'allow'
            ? 'allowed (allow_internet_access: true)'
            : 'asked the provider to deny it (allow_internet_access: false); not probed by svc',
      };
    },

    async exec(c, st, argv, timeoutSec) {
      await extended.keepAlive(c, st);
      return run(c, st, argv, timeoutSec);
    },

    async upload(c, st, path, data) {
      await extended.keepAlive(c, st);
      const { base, headers } = envdRoute(c, st);
      const q = new URLSearchParams({ path, username: st.data.user || 'root' });
      await call(NAME, `${joinUrl(base, '/files')}?${q}`, {
        method: 'POST',
        headers,
        body: data,
        timeoutMs: LIMITS.callMs * 10,
      });
    },

    async download(c, st, path) {
      await extended.keepAlive(c, st);
      const { base, headers } = envdRoute(c, st);
      const q = new URLSearchParams({ path, username: st.data.user || 'root' });
      const r = await call(NAME, `${joinUrl(base, '/files')}?${q}`, {
        headers: { ...headers, accept: 'application/octet-stream' },
        timeoutMs: LIMITS.callMs * 10,
      });
      return r.bytes;
    },

    /** Pause (the sandbox is persisted, memory included), then resume through connect. */
    async snapshot(c, st) {
      const url = (p: string) => joinUrl(c.api, `/sandboxes/${encodeURIComponent(st.ref)}${p}`);
      await call(NAME, url('/pause'), { method: 'POST', headers: api(c), body: {}, accept: [409] });
      const r = await call(NAME, url('/connect'), {
        method: 'POST',
        headers: api(c),
        body: { timeout: SANDBOX_TTL_SEC },
        timeoutMs: LIMITS.callMs * 2,
      });
      const sb = r.json<Sandbox>();
      return sandboxState({ ...sb, sandboxID: st.ref, templateID: st.data.template }, st.data.user);
    },

    async labelled(c, envId) {
      const q = new URLSearchParams({ metadata: new URLSearchParams({ svc_env: envId }).toString() });
      const r = await call(NAME, `${joinUrl(c.api, '/sandboxes')}?${q}`, { headers: api(c) });
      const list = r.json<{ sandboxID?: string }[]>();
      return Array.isArray(list) ? list.map((x) => x.sandboxID).filter((x): x is string => !!x) : [];
    },

    async destroy(c, st) {
      extended.forget(st.ref);
      await call(NAME, joinUrl(c.api, `/sandboxes/${encodeURIComponent(st.ref)}`), {
        method: 'DELETE',
        headers: api(c),
        accept: [404],
      });
    },
  };
  return provider;
}
