// Console sign-in through the code host (spec "GET /auth/codehost/start" and "/callback", process
// rule 2): a `state` kept for 10 minutes binds the callback to its start and to the return URL,
// which must be the console origin or a loopback URL. States live in the database (as sha256
// hashes), so the callback may reach any control-plane replica, not only the one that started it. The callback exchanges the code,
// reads the user and their verified e-mail, signs them in and ends at `<return>#token=<session>`.
// The user's code-host token is kept sealed for linking installations (user-token.ts).
import { randomBytes } from 'node:crypto';
import { dropExpired } from '../cluster/store.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/types.ts';
import { BadRequest, Upstream } from '../errors.ts';
import { hashSecret, sameHash } from '../identity/secrets.ts';
import { signInWithCodehost } from '../identity/user-store.ts';
import { consoleUrl, requireSignIn } from './codehost.ts';
import { call, type GitHub } from './github.ts';
import { deleteOAuthState, expireOAuthStates, insertOAuthState, oauthState } from './store.ts';
import type { Exchanged, UserTokens } from './user-token.ts';

export const STATE_TTL_MS = 10 * 60 * 1000;
/** Expired states deleted per start: the table stays as small as the sign-ins of 10 minutes. */
const CLEANUP_BATCH = 100;
const SCOPES = 'read:user user:email';

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/** `return` must be on the console's origin or a loopback http(s) URL; default `<console>/app/`. */
export function returnUrl(config: Config, given: string | undefined): string {
  const console = consoleUrl(config);
  if (given === undefined || given === '') return `${console}/app/`;
  let u: URL;
  try {
    u = new URL(given);
  } catch {
    throw new BadRequest(`return '${given.slice(0, 200)}' is not a URL`);
  }
  const sameConsole = u.origin === new URL(console).origin;
  const loopback = (u.protocol === 'http:' || u.protocol === 'https:') && LOOPBACK.has(u.hostname);
  if (!sameConsole && !loopback)
    throw new BadRequest(`return must be the console (${console}) or a loopback URL, not ${u.origin}`);
  u.hash = '';
  return u.toString();
}

export class OAuthStates {
  readonly #db: Db;

  constructor(db: Db) {
    this.#db = db;
  }

  async create(returnTo: string): Promise<string> {
    const state = randomBytes(24).toString('base64url');
    const at = Date.now();
    await dropExpired(
      this.#db,
      'oauth_states',
      'state_hash',
      'expires_at',
      new Date(at).toISOString(),
      CLEANUP_BATCH,
    );
    await insertOAuthState(this.#db, hashSecret(state), returnTo, new Date(at + STATE_TTL_MS).toISOString());
    return state;
  }

  /** The return URL of a live state, which is used up; 400 for an unknown or expired one. */
  async take(state: string | undefined): Promise<string> {
    const hash = state && state.length <= 256 ? hashSecret(state) : '';
    const found = hash ? await oauthState(this.#db, hash) : undefined;
    // Used up by whoever deletes it: of two callbacks racing on two replicas, one gets on.
    const taken =
      found !== undefined && sameHash(found.state_hash, hash) && (await deleteOAuthState(this.#db, hash));
    if (!found || !taken) throw new BadRequest('unknown sign-in state: start again at /auth/codehost/start');
    if (Date.parse(found.expires_at) <= Date.now())
      throw new BadRequest('sign-in state expired: start again at /auth/codehost/start');
    return found.return_to;
  }

  /** Tests: make every waiting state older than its 10 minutes. */
  async expireAll(): Promise<void> {
    await expireOAuthStates(this.#db);
  }
}

export const callbackUrl = (config: Config): string =>
  `${config.publicUrl.replace(/\/+$/, '')}/auth/codehost/callback`;

export async function startUrl(
  config: Config,
  github: GitHub,
  states: OAuthStates,
  given: string | undefined,
): Promise<string> {
  requireSignIn(config);
  const state = await states.create(returnUrl(config, given));
  const q = new URLSearchParams({
    client_id: config.codehost.clientId,
    redirect_uri: callbackUrl(config),
    scope: SCOPES,
    state,
  });
  return `${github.web}/login/oauth/authorize?${q}`;
}

interface GhUser {
  id: number;
  login: string;
  name?: string | null;
  email?: string | null;
}
interface GhEmail {
  email: string;
  primary: boolean;
  verified: boolean;
}

/** The whole callback: returns where to redirect (`<return>#token=<session>`). */
export async function finishSignIn(
  db: Db,
  config: Config,
  github: GitHub,
  states: OAuthStates,
  tokens: UserTokens,
  q: { code?: string; state?: string },
): Promise<string> {
  requireSignIn(config);
  const returnTo = await states.take(q.state);
  if (!q.code) throw new BadRequest('the code host sent no code');
  const exchanged = await call<Exchanged>('POST', `${github.web}/login/oauth/access_token`, {
    accept: 'application/json',
    body: {
      client_id: config.codehost.clientId,
      client_secret: config.codehost.clientSecret,
      code: q.code,
      redirect_uri: callbackUrl(config),
    },
  });
  if (!exchanged.access_token)
    throw new Upstream(
      `code host refused the sign-in: ${exchanged.error_description ?? exchanged.error ?? 'no token'}`,
    );
  const user = await call<GhUser>('GET', `${github.api}/user`, { token: exchanged.access_token });
  const emails = await call<GhEmail[]>('GET', `${github.api}/user/emails`, { token: exchanged.access_token });
  const verified = Array.isArray(emails) ? emails.filter((e) => e.verified) : [];
  const email = (verified.find((e) => e.primary) ?? verified[0])?.email;
  if (!email) throw new BadRequest(`code-host user ${user.login} has no verified e-mail address`);
  const { token, user: signedIn } = await signInWithCodehost(db, {
    codehostId: String(user.id),
    login: user.login,
    name: user.name ?? '',
    email,
  });
  // Kept (sealed) to ask later which installations this user can see; see user-token.ts.
  await tokens.keep(signedIn.ID, exchanged);
  return `${returnTo}#token=${token}`;
}
