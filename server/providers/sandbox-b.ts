// sandbox-b: Daytona's public API (corpus: daytona__api-client-go__openapi.yaml and the toolbox
// spec). `Authorization: Bearer <token>` for the API and the toolbox. Create, poll until started,
// exec through the toolbox's process/execute, one file at a time through files/upload and
// files/download, delete with force. Snapshots are refused (its snapshot API builds images).
import type { Egress, ServiceRecord } from '../../protocol/spec.ts';
import { AGAIN, retry } from '../../shared/concurrency.ts';
import type { Created, ProviderCloud, SandboxProvider } from './driver-host.ts';
import { BACKGROUND, serviceArgv } from './driver-host.ts';
import { call, joinUrl, LIMITS, ProviderError } from './http.ts';
import type { ProviderState } from './state-store.ts';

const NAME = 'sandbox-b';
/** How long a new sandbox may take to reach `started`, and how often it is asked. */
export const START_WAIT = { ms: 5 * 60_000, pollMs: 500 };
const FAILED = new Set(['error', 'build_failed', 'destroyed', 'destroying']);

interface Sandbox {
  id: string;
  state?: string;
  errorReason?: string;
  toolboxProxyUrl?: string;
}

const auth = (c: ProviderCloud) => ({ Authorization: `Bearer ${c.config.token}` });

/** `{toolboxProxyUrl}/{id}` when the API gives one, else the API's own toolbox proxy. */
export function toolboxOf(c: ProviderCloud, sb: Sandbox): string {
  const id = encodeURIComponent(sb.id);
  return sb.toolboxProxyUrl
    ? joinUrl(sb.toolboxProxyUrl, `/${id}`)
    : joinUrl(c.api, `/toolbox/${id}/toolbox`);
}

/** POSIX shell quoting: the toolbox takes one command string. */
export const shellQuote = (argv: string[]): string =>
  argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');

async function waitStarted(c: ProviderCloud, id: string): Promise<Sandbox> {
  const deadline = Date.now() + START_WAIT.ms;
  return retry(
    async () => {
      const sb = (
        await call(NAME, joinUrl(c.api, `/sandbox/${encodeURIComponent(id)}`), { headers: auth(c) })
      ).json<Sandbox>();
      if (sb.state === 'started') return sb;
      if (sb.state && FAILED.has(sb.state))
        throw new ProviderError(
          `${NAME}: sandbox ${id} is ${sb.state}: ${sb.errorReason || 'no reason given'}`,
          0,
        );
      if (Date.now() > deadline)
        throw new ProviderError(
          `${NAME}: sandbox ${id} not started within ${Math.round(START_WAIT.ms / 1000)} s (state ${sb.state})`,
          0,
        );
      return AGAIN;
    },
    { delayMs: START_WAIT.pollMs },
  );
}

async function execute(c: ProviderCloud, st: ProviderState, command: string, timeoutSec: number) {
  const r = await call(NAME, joinUrl(st.data.toolbox, '/process/execute'), {
    method: 'POST',
    headers: auth(c),
    body: { command, timeout: timeoutSec },
    timeoutMs: (timeoutSec + 10) * 1000,
  });
  const out = r.json<{ exitCode?: number; result?: string }>();
  return { exit_code: Number(out.exitCode ?? 0), stdout: String(out.result ?? ''), stderr: '' };
}

async function create(c: ProviderCloud, envId: string, s: ServiceRecord, egress: Egress): Promise<Created> {
  const common = {
    env: s.env,
    labels: { svc_env: envId },
    networkBlockAll: egress === 'deny',
    autoStopInterval: 0,
  };
  const post = (body: object) =>
    call(NAME, joinUrl(c.api, '/sandbox'), {
      method: 'POST',
      headers: auth(c),
      body: { ...common, ...body },
    });
  let r: Awaited<ReturnType<typeof post>>;
  try {
    // From the image (a one-line build), as the SDK does for an image; else a snapshot of that name.
    r = await post({ buildInfo: { dockerfileContent: `FROM ${s.image}\n` } });
  } catch (err) {
    if (
      !(err instanceof ProviderError) ||
      err.status < 400 ||
      err.status >= 500 ||
      [401, 403].includes(err.status)
    )
      throw err;
    r = await post({ snapshot: s.image });
  }
  const made = r.json<Sandbox>();
  if (typeof made?.id !== 'string' || !made.id)
    throw new ProviderError(`${NAME}: POST /sandbox: answer has no id`, r.status);
  const st = { ref: made.id, data: {} } as ProviderState;
  try {
    const sb = await waitStarted(c, made.id);
    st.data = { toolbox: toolboxOf(c, sb) };
    const argv = serviceArgv(s);
    if (argv) {
      const line = shellQuote(['/bin/sh', '-c', BACKGROUND, 'svc-command', ...argv]);
      const started = await execute(c, st, line, 60);
      if (started.exit_code !== 0)
        throw new Error(
          `${NAME}: the service command did not start: ${started.stdout.trim() || started.exit_code}`,
        );
    }
  } catch (err) {
    await sandboxB.destroy(c, st).catch(() => {});
    throw err;
  }
  return {
    ref: made.id,
    data: st.data,
    egress:
      egress === 'allow'
        ? 'allowed'
        : 'asked the provider to block all traffic (networkBlockAll: true); limited, not probed by svc',
  };
}

export const sandboxB: SandboxProvider = {
  name: NAME,

  async check(c) {
    const r = await call(NAME, joinUrl(c.api, '/sandbox'), { headers: auth(c) });
    const list = r.json<unknown>();
    return { api_url: c.api, sandboxes: Array.isArray(list) ? list.length : 0 };
  },

  create,

  async exec(c, st, argv, timeoutSec) {
    return execute(c, st, shellQuote(argv), timeoutSec);
  },

  async upload(c, st, path, data) {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(data)]), path.split('/').pop() || 'file');
    await call(NAME, `${joinUrl(st.data.toolbox, '/files/upload')}?${new URLSearchParams({ path })}`, {
      method: 'POST',
      headers: auth(c),
      body: form,
      timeoutMs: LIMITS.callMs * 10,
    });
  },

  async download(c, st, path) {
    const r = await call(
      NAME,
      `${joinUrl(st.data.toolbox, '/files/download')}?${new URLSearchParams({ path })}`,
      {
        headers: { ...auth(c), accept: 'application/octet-stream' },
        timeoutMs: LIMITS.callMs * 10,
      },
    );
    return r.bytes;
  },

  async labelled(c, envId) {
    const q = new URLSearchParams({ labels: JSON.stringify({ svc_env: envId }) });
    const r = await call(NAME, `${joinUrl(c.api, '/sandbox')}?${q}`, { headers: auth(c) });
    const list = r.json<{ id?: string }[]>();
    return Array.isArray(list) ? list.map((x) => x.id).filter((x): x is string => !!x) : [];
  },

  async destroy(c, st) {
    await call(NAME, `${joinUrl(c.api, `/sandbox/${encodeURIComponent(st.ref)}`)}?force=true`, {
      method: 'DELETE',
      headers: auth(c),
      accept: [404],
    });
  },
};
