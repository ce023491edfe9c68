// The code host's API as the integration uses it (GitHub's REST shapes; SVC_CODEHOST_API_URL moves
// it, e.g. to GitHub Enterprise or a test fake). The web base (OAuth pages, the token exchange) is the
// API base without a trailing /api/v3. The app authenticates with a short RS256 JWT (iss = app id) and
// buys installation tokens, cached until a minute before they expire. Every call has a timeout, and a
// refusal or an unreachable host is an Upstream error (502) carrying the provider's own message.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SignJWT } from 'jose';
import { Upstream } from '../errors.ts';

export const CALL_TIMEOUT_MS = 15_000;
/** Answers larger than this are refused (a contents answer is at most ~1 MiB of file, base64). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

/** `https://ghe.example/api/v3` → `https://ghe.example`; any other base serves both. */
export function webBase(apiUrl: string): string {
  const base = apiUrl.replace(/\/+$/, '');
  return base.endsWith('/api/v3') ? base.slice(0, -'/api/v3'.length) : base;
}

/** The app's key: PEM text, or a path to a PEM file (PKCS#1 as GitHub issues it, or PKCS#8). */
export function loadAppKey(value: string): KeyObject {
  const pem = value.includes('-----BEGIN') ? value : readFileSync(value, 'utf8');
  return createPrivateKey(pem.replace(/\\n/g, '\n'));
}

/** A non-2xx answer; `upstreamStatus` is the code host's status (the API answer stays a 502). */
export class HttpFailure extends Upstream {
  readonly upstreamStatus: number;
  constructor(upstreamStatus: number, message: string) {
    super(message);
    this.upstreamStatus = upstreamStatus;
  }
}

async function readBounded(res: Response): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > MAX_ANSWER_BYTES) throw new Upstream(`code host answer too large (${declared} bytes)`);
  const text = await res.text();
  if (text.length > MAX_ANSWER_BYTES) throw new Upstream('code host answer too large');
  return text;
}

/** One JSON call; a non-2xx answer throws HttpFailure with GitHub's `message`. */
export async function call<T>(
  method: string,
  url: string,
  opts: { token?: string; body?: unknown; accept?: string } = {},
): Promise<T> {
  const headers: Record<string, string> = {
    accept: opts.accept ?? 'application/vnd.github+json',
    'user-agent': 'svc-control-plane',
    'x-github-api-version': '2022-11-28',
  };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      redirect: 'error',
    });
  } catch (err) {
    const e = err as Error;
    const why = e.name === 'TimeoutError' ? `no answer in ${CALL_TIMEOUT_MS / 1000} s` : e.message;
    throw new Upstream(`code host ${method} ${new URL(url).pathname}: ${why}`);
  }
  const text = await readBounded(res);
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  if (!res.ok) {
    const message = (body as { message?: string } | null)?.message ?? (text.slice(0, 200) || res.statusText);
    throw new HttpFailure(
      res.status,
      `code host ${method} ${new URL(url).pathname}: ${res.status} ${message}`,
    );
  }
  return body as T;
}

export interface RepoInfo {
  full_name: string;
  default_branch: string;
  private: boolean;
}

export class GitHub {
  readonly api: string;
  readonly web: string;
  #appId: string;
  #key: KeyObject | null = null;
  #keyText: string;
  #tokens = new Map<number, { token: string; until: number }>();

  constructor(apiUrl: string, appId = '', appKey = '') {
    this.api = apiUrl.replace(/\/+$/, '');
    this.web = webBase(apiUrl);
    this.#appId = appId;
    this.#keyText = appKey;
  }

  /** The app's JWT: RS256, iss = app id, issued a minute back (clock skew), 10 minutes in all. */
  async appJwt(): Promise<string> {
    this.#key ??= loadAppKey(this.#keyText);
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: 'RS256' })
      .setIssuer(this.#appId)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + 540)
      .sign(this.#key);
  }

  /** An installation token, bought with the app's JWT and reused until a minute before expiry. */
  async installationToken(installationId: number): Promise<string> {
    const cached = this.#tokens.get(installationId);
    if (cached && cached.until > Date.now()) return cached.token;
    const got = await call<{ token: string; expires_at: string }>(
      'POST',
      `${this.api}/app/installations/${installationId}/access_tokens`,
      { token: await this.appJwt() },
    );
    const until = Date.parse(got.expires_at) - 60_000;
    this.#tokens.set(installationId, { token: got.token, until: Number.isFinite(until) ? until : 0 });
    return got.token;
  }

  async asInstallation<T>(id: number, method: string, path: string, body?: unknown): Promise<T> {
    return call<T>(method, `${this.api}${path}`, { token: await this.installationToken(id), body });
  }

  async repositories(installationId: number): Promise<RepoInfo[]> {
    const out: RepoInfo[] = [];
    for (let page = 1; page <= 10; page++) {
      const got = await this.asInstallation<{ repositories: RepoInfo[] }>(
        installationId,
        'GET',
        `/installation/repositories?per_page=100&page=${page}`,
      );
      out.push(
        ...got.repositories.map((r) => ({
          full_name: r.full_name,
          default_branch: r.default_branch,
          private: r.private,
        })),
      );
      if (got.repositories.length < 100) break;
    }
    return out;
  }

  /** The text of `path` at `ref` (a sha or a branch). */
  async fileAt(installationId: number, repo: string, path: string, ref: string): Promise<string> {
    const q = `?ref=${encodeURIComponent(ref)}`;
    const got = await this.asInstallation<{ type?: string; encoding?: string; content?: string }>(
      installationId,
      'GET',
      `/repos/${repo}/contents/${path.split('/').map(encodeURIComponent).join('/')}${q}`,
    );
    if (got.type !== 'file' || got.encoding !== 'base64' || typeof got.content !== 'string')
      throw new Upstream(`code host: ${repo}/${path} at ${ref} is not a file`);
    return Buffer.from(got.content, 'base64').toString('utf8');
  }

  async branchHead(installationId: number, repo: string, branch: string): Promise<string> {
    const got = await this.asInstallation<{ commit?: { sha?: string } }>(
      installationId,
      'GET',
      `/repos/${repo}/branches/${encodeURIComponent(branch)}`,
    );
    if (!got.commit?.sha) throw new Upstream(`code host: branch ${branch} of ${repo} has no commit`);
    return got.commit.sha;
  }
}
