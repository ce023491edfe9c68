// `login` (the device flow: code, approval in the browser, poll for the key) and `whoami`.
import { spawn } from 'node:child_process';
import { sleep } from '../../shared/concurrency.ts';
import type { ApiAnswer } from '../api-types.ts';
import type { Command, Output } from '../command.ts';
import { configPath, DEFAULT_SERVER, normaliseServer, readConfigFile, writeConfigFile } from '../config.ts';
import { CliError } from '../errors.ts';
import { Client, HttpError } from '../http.ts';
import { simple } from './simple.ts';

type DeviceCodeBody = ApiAnswer<'post', '/v1/device/code'>;
type DeviceTokenBody = ApiAnswer<'post', '/v1/device/token'>;

export const LOGIN_LIMIT_MS = 15 * 60 * 1000;
const DEFAULT_INTERVAL_SEC = 5;

/** Failure to open a browser is not an error: the URL is printed anyway. */
function openBrowser(url: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : 'xdg-open';
  try {
    const child = spawn(cmd, [url], { stdio: 'ignore', detached: true });
    child.on('error', () => {});
    child.unref();
  } catch {
    // no opener on this machine
  }
}

/** `--server`, else SVC_SERVER, else the file's server (a broken file is being replaced), else the default. */
function loginServer(
  flag: string | undefined,
  env: Record<string, string | undefined>,
  path: string,
): string {
  if (flag) return normaliseServer(flag);
  if (env.SVC_SERVER) return normaliseServer(env.SVC_SERVER);
  let fileServer: string | undefined;
  try {
    fileServer = env.SVC_API_KEY ? undefined : readConfigFile(path)?.server;
  } catch {
    fileServer = undefined;
  }
  return normaliseServer(fileServer || DEFAULT_SERVER);
}

async function pollForKey(client: Client, code: DeviceCodeBody): Promise<DeviceTokenBody> {
  let interval = Number.isFinite(code.interval) && code.interval > 0 ? code.interval : DEFAULT_INTERVAL_SEC;
  const expires =
    Number.isFinite(code.expires_in) && code.expires_in > 0 ? code.expires_in * 1000 : LOGIN_LIMIT_MS;
  const deadline = Date.now() + Math.min(LOGIN_LIMIT_MS, expires);
  for (;;) {
    await sleep(interval * 1000);
    if (Date.now() > deadline)
      throw new CliError('login timed out: the code was not approved within 15 minutes; run svc login again');
    try {
      return await client.call('post', '/v1/device/token', {
        json: { device_code: code.device_code },
        auth: false,
      });
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      if (err.status === 428) continue;
      const reason = (err.body as { error?: string } | undefined)?.error ?? err.message;
      if (reason === 'slow_down') {
        interval += 5;
        continue;
      }
      if (reason === 'expired_token')
        throw new CliError('login failed: the code expired before it was approved; run svc login again');
      throw new CliError(`login failed: ${err.message} (HTTP ${err.status})`);
    }
  }
}

function announce(io: Output, code: DeviceCodeBody): void {
  io.out(`To sign in, open ${code.verification_uri} and enter the code ${code.user_code}\n`);
  io.out(`(direct link: ${code.verification_uri_complete})\n`);
  io.out('Waiting for approval...\n');
}

export const login: Command = {
  words: ['login'],
  summary: 'Sign in with the device flow and save an API key to the config file',
  details:
    'Prints a URL and a user code, opens the browser at the approval page, and polls the server\n' +
    'every few seconds (15 minutes at most) until the code is approved. The key, the server and\n' +
    'the team are written to $XDG_CONFIG_HOME/svc/config.json or ~/.config/svc/config.json (0600).\n' +
    'Other flags and arguments are ignored.',
  lenient: true,
  local: true,
  flags: [
    {
      name: 'server',
      type: 'string',
      value: 'URL',
      help: 'Control plane to sign in to (default SVC_SERVER, the file, http://localhost:8080)',
    },
    { name: 'no-browser', type: 'boolean', help: 'Do not open a browser; only print the URL' },
  ],
  positionals: [],
  async run(ctx) {
    const path = configPath(ctx.env);
    const server = loginServer(ctx.flags.server as string | undefined, ctx.env, path);
    const client = new Client(server, undefined);
    const code = await client.call('post', '/v1/device/code', { json: {}, auth: false });
    announce(ctx.io, code);
    if (ctx.flags['no-browser'] !== true) openBrowser(code.verification_uri_complete);
    const issued = await pollForKey(client, code);
    writeConfigFile(path, { server, api_key: issued.api_key, team: issued.team.Name });
    ctx.io.out(`Signed in to team ${issued.team.Name}. Key saved to ${path}.\n`);
    return 0;
  },
};

export const whoami = simple({
  words: ['whoami'],
  summary: 'Show the team (and user) the credential acts as (GET /v1/me)',
  method: 'get',
  route: '/v1/me',
  options: () => ({}),
});
