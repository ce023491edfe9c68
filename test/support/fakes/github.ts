// A local stand-in for GitHub speaking its real shapes, for the code-hosting tests: the OAuth pages
// and token exchange (web base; a GitHub App's `ghu_` user tokens, expiring with a one-use `ghr_`
// refresh token when asked), `/user`, `/user/emails` and `/user/installations` (paginated), the app's installation tokens (the
// app's RS256 JWT is verified: signature, iss, lifetime), installation repositories, branches,
// contents at a ref, repository archives (`tarball/{ref}` answers 302 to a codeload-style URL that
// carries its own token and serves what `git archive` makes of the files at that sha: one top-level
// `owner-repo-<sha7>/` directory and a pax global header), and check runs. The API lives under
// /api/v3 (the Enterprise layout), the web pages at the root, so the server's base-URL rule is
// exercised too. Every request is recorded.

import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { jwtVerify } from 'jose';

export interface FakeRepo {
  full_name: string;
  default_branch: string;
  private: boolean;
  installation: number;
  /** branch → head sha */
  branches: Record<string, string>;
  /** sha → path → text */
  files: Record<string, Record<string, string>>;
}

/** What `git archive --format=tar.gz --prefix=<top>/` makes of `files` (a throwaway repository). */
export function gitArchive(files: Record<string, string>, top: string): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'fake-gh-'));
  try {
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=octo', '-c', 'user.email=o@example.com', '-C', dir, ...args], {
        maxBuffer: 512 * 1024 * 1024,
      });
    git('init', '-q');
    git('add', '-A');
    git('commit', '-qm', 'fake', '--allow-empty');
    return git('archive', '--format=tar.gz', `--prefix=${top}/`, 'HEAD');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface FakeUser {
  id: number;
  login: string;
  name: string;
  emails: { email: string; primary: boolean; verified: boolean }[];
  /** The app's installations this user can see (`GET /user/installations`). */
  installations?: number[];
}

export interface Recorded {
  method: string;
  path: string;
  auth: string;
  body: any;
}

export class FakeGitHub {
  readonly appId = '4242';
  readonly privateKeyPem: string;
  readonly clientId = 'Iv1.fakeclient';
  readonly clientSecret = 'fake-client-secret';
  url = '';
  repos: FakeRepo[] = [];
  /** Who authorizes at the next sign-in. */
  user: FakeUser = {
    id: 583231,
    login: 'octocat',
    name: 'The Octocat',
    emails: [{ email: 'octocat@github.example', primary: true, verified: true }],
  };
  /** Installation id → its account's login, for `GET /user/installations`. */
  accounts: Record<number, string> = {};
  /** Issue expiring user tokens (8 h) with refresh tokens (6 months), as GitHub Apps do by default. */
  expiringTokens = false;
  /** Answer check-run creation with this status instead (e.g. 403: no Checks: write). */
  checkRunStatus = 201;
  requests: Recorded[] = [];
  checkRuns: { id: number; repo: string; body: any; updates: any[] }[] = [];
  /** Serve these bytes instead of the archive; with a declared length, the answer stays open after them. */
  archiveOverride: Buffer | null = null;
  archiveDeclaredLength = 0;
  #archiveTokens = new Map<string, string>();
  #publicKey: KeyObject;
  #codes = new Map<string, FakeUser>();
  #userTokens = new Map<string, FakeUser>();
  #refreshTokens = new Map<string, FakeUser>();
  #instTokens = new Map<string, number>();
  #server: Server;

  constructor() {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    this.privateKeyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
    this.#publicKey = publicKey;
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  async start(): Promise<this> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as { port: number }).port}`;
    return this;
  }

  get apiUrl(): string {
    return `${this.url}/api/v3`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((r) => this.#server.close(() => r()));
  }

  /** The server's environment for an app (and sign-in) pointed at this fake. */
  env(secret = 'webhook-secret'): Record<string, string> {
    return {
      SVC_CODEHOST_API_URL: this.apiUrl,
      SVC_CODEHOST_APP_ID: this.appId,
      SVC_CODEHOST_APP_PRIVATE_KEY: this.privateKeyPem,
      SVC_CODEHOST_WEBHOOK_SECRET: secret,
      SVC_CODEHOST_CLIENT_ID: this.clientId,
      SVC_CODEHOST_CLIENT_SECRET: this.clientSecret,
    };
  }

  calls(method: string, prefix: string): Recorded[] {
    return this.requests.filter((r) => r.method === method && r.path.startsWith(prefix));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: any = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const u = new URL(req.url ?? '/', this.url);
    const auth = req.headers.authorization ?? '';
    this.requests.push({ method: req.method ?? '', path: u.pathname + u.search, auth, body });
    const send = (status: number, data: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
      res.end(JSON.stringify(data));
    };
    try {
      await this.#route(req.method ?? '', u, auth, body, send, res);
    } catch (err) {
      send(500, { message: (err as Error).message });
    }
  }

  async #route(
    method: string,
    u: URL,
    auth: string,
    body: any,
    send: (s: number, d: unknown, h?: Record<string, string>) => void,
    res: ServerResponse,
  ): Promise<void> {
    const p = u.pathname;
    const bearer = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    if (method === 'GET' && p === '/login/oauth/authorize') {
      // The user "authorizes" at once: back to the app's redirect_uri with a code and the state.
      const code = randomBytes(10).toString('hex');
      this.#codes.set(code, this.user);
      const back = new URL(u.searchParams.get('redirect_uri') ?? '');
      back.searchParams.set('code', code);
      back.searchParams.set('state', u.searchParams.get('state') ?? '');
      res.writeHead(302, { location: back.toString() });
      res.end();
      return;
    }
    if (method === 'POST' && p === '/login/oauth/access_token') {
      if (body?.client_id !== this.clientId || body?.client_secret !== this.clientSecret)
        return send(200, {
          error: 'incorrect_client_credentials',
          error_description: 'The client_id and/or client_secret passed are incorrect.',
        });
      const refreshing = body?.grant_type === 'refresh_token';
      const user = refreshing ? this.#refreshTokens.get(body?.refresh_token) : this.#codes.get(body?.code);
      if (!user)
        return send(
          200,
          refreshing
            ? {
                error: 'bad_refresh_token',
                error_description: 'The refresh token passed is incorrect or expired.',
              }
            : {
                error: 'bad_verification_code',
                error_description: 'The code passed is incorrect or expired.',
              },
        );
      // A code and a refresh token each work once.
      this.#codes.delete(body?.code);
      this.#refreshTokens.delete(body?.refresh_token);
      const token = `ghu_${randomBytes(12).toString('hex')}`;
      this.#userTokens.set(token, user);
      if (!this.expiringTokens) return send(200, { access_token: token, token_type: 'bearer', scope: '' });
      const refresh = `ghr_${randomBytes(12).toString('hex')}`;
      this.#refreshTokens.set(refresh, user);
      return send(200, {
        access_token: token,
        expires_in: 28800,
        refresh_token: refresh,
        refresh_token_expires_in: 15897600,
        token_type: 'bearer',
        scope: '',
      });
    }
    const codeload = /^\/_codeload\/([^/]+\/[^/]+)\/legacy\.tar\.gz\/([0-9a-f]{40})$/.exec(p);
    if (method === 'GET' && codeload) {
      // The temporary URL's own token is the credential; GitHub sends no Authorization here.
      const repo = this.repos.find((r) => r.full_name === codeload[1]);
      const token = u.searchParams.get('token') ?? '';
      if (!repo || this.#archiveTokens.get(token) !== codeload[2]) return send(404, { message: 'Not Found' });
      const files = repo.files[codeload[2]] ?? {};
      const top = `${repo.full_name.replace('/', '-')}-${codeload[2].slice(0, 7)}`;
      const body = this.archiveOverride ?? gitArchive(files, top);
      const length = this.archiveDeclaredLength || body.length;
      res.writeHead(200, { 'content-type': 'application/x-gzip', 'content-length': String(length) });
      if (length === body.length) res.end(body);
      else res.write(body);
      return;
    }
    if (!p.startsWith('/api/v3/')) return send(404, { message: 'Not Found' });
    const api = p.slice('/api/v3'.length);
    if (api === '/user' || api === '/user/emails' || api === '/user/installations') {
      const user = this.#userTokens.get(bearer);
      if (!user) return send(401, { message: 'Bad credentials' });
      if (api === '/user/emails') return send(200, user.emails);
      if (api === '/user/installations') return this.#userInstallations(user, u, send);
      const { id, login, name } = user;
      return send(200, { id, login, name, email: null, type: 'User' });
    }
    const tokenMatch = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(api);
    if (method === 'POST' && tokenMatch) {
      const why = await this.#badJwt(bearer);
      if (why) return send(401, { message: why });
      const token = `ghs_${randomBytes(12).toString('hex')}`;
      this.#instTokens.set(token, Number(tokenMatch[1]));
      return send(201, { token, expires_at: new Date(Date.now() + 3600_000).toISOString() });
    }
    const inst = this.#instTokens.get(bearer);
    if (inst === undefined) return send(401, { message: 'Bad credentials' });
    if (method === 'GET' && api === '/installation/repositories') {
      const repos = this.repos.filter((r) => r.installation === inst);
      return send(200, {
        total_count: repos.length,
        repositories: repos.map((r) => ({
          full_name: r.full_name,
          default_branch: r.default_branch,
          private: r.private,
        })),
      });
    }
    const m = /^\/repos\/([^/]+\/[^/]+)\/(contents|branches|check-runs|tarball)(?:\/(.+))?$/.exec(api);
    const repo = m && this.repos.find((r) => r.full_name === m[1] && r.installation === inst);
    if (!m || !repo) return send(404, { message: 'Not Found' });
    const rest = m[3] ? decodeURIComponent(m[3]) : '';
    if (method === 'GET' && m[2] === 'contents') {
      const ref = u.searchParams.get('ref') ?? repo.branches[repo.default_branch];
      const sha = repo.branches[ref] ?? ref;
      const file = repo.files[sha]?.[rest];
      if (file === undefined) return send(404, { message: 'Not Found' });
      return send(200, {
        type: 'file',
        encoding: 'base64',
        path: rest,
        sha,
        content: Buffer.from(file).toString('base64'),
      });
    }
    if (method === 'GET' && m[2] === 'tarball') {
      const ref = rest || repo.default_branch;
      const sha = repo.branches[ref] ?? ref;
      if (!repo.files[sha]) return send(404, { message: 'Not Found' });
      const token = randomBytes(12).toString('hex');
      this.#archiveTokens.set(token, sha);
      const location = `${this.url}/_codeload/${repo.full_name}/legacy.tar.gz/${sha}?token=${token}`;
      res.writeHead(302, { location, 'content-length': '0' });
      res.end();
      return;
    }
    if (method === 'GET' && m[2] === 'branches') {
      const sha = repo.branches[rest];
      return sha ? send(200, { name: rest, commit: { sha } }) : send(404, { message: 'Branch not found' });
    }
    if (method === 'POST' && m[2] === 'check-runs' && !rest) {
      if (this.checkRunStatus !== 201)
        return send(this.checkRunStatus, { message: 'Resource not accessible by integration' });
      const id = 1000 + this.checkRuns.length;
      this.checkRuns.push({ id, repo: repo.full_name, body, updates: [] });
      return send(201, { id, status: body?.status, head_sha: body?.head_sha });
    }
    if (method === 'PATCH' && m[2] === 'check-runs') {
      const run = this.checkRuns.find((c) => c.id === Number(rest));
      if (!run) return send(404, { message: 'Not Found' });
      run.updates.push(body);
      return send(200, { id: run.id, ...body });
    }
    return send(404, { message: 'Not Found' });
  }

  /** Every user token stops working (expired or revoked at the code host); refresh tokens stay. */
  revokeUserTokens(): void {
    this.#userTokens.clear();
  }

  /**
   * `GET /user/installations`: `{total_count, installations}`, paginated by `per_page` (default
   * 30, at most 100) and `page`, with GitHub's `Link` header naming the next and last pages.
   */
  #userInstallations(
    user: FakeUser,
    u: URL,
    send: (s: number, d: unknown, h?: Record<string, string>) => void,
  ): void {
    const ids = user.installations ?? [];
    const perPage = Math.min(100, Math.max(1, Number(u.searchParams.get('per_page') ?? 30) || 30));
    const page = Math.max(1, Number(u.searchParams.get('page') ?? 1) || 1);
    const last = Math.max(1, Math.ceil(ids.length / perPage));
    const installations = ids.slice((page - 1) * perPage, page * perPage).map((id) => ({
      id,
      account: { login: this.accounts[id] ?? `account-${id}`, id: 10_000 + id, type: 'Organization' },
      app_id: Number(this.appId),
      target_type: 'Organization',
      repository_selection: 'selected',
    }));
    const at = (n: number) => {
      const next = new URL(u);
      next.searchParams.set('page', String(n));
      next.searchParams.set('per_page', String(perPage));
      return next.toString();
    };
    const links = page < last ? [`<${at(page + 1)}>; rel="next"`, `<${at(last)}>; rel="last"`] : [];
    send(200, { total_count: ids.length, installations }, links.length ? { link: links.join(', ') } : {});
  }

  /** Why a presented app JWT is refused, or '' when GitHub would take it. */
  async #badJwt(jwt: string): Promise<string> {
    try {
      const { payload } = await jwtVerify(jwt, this.#publicKey, {
        algorithms: ['RS256'],
        issuer: this.appId,
      });
      if (typeof payload.iat !== 'number' || typeof payload.exp !== 'number') return 'JWT without iat/exp';
      if (payload.exp - payload.iat > 600) return "'Expiration time' claim ('exp') is too far in the future";
      return '';
    } catch (err) {
      return `A JSON web token could not be decoded: ${(err as Error).message}`;
    }
  }
}
