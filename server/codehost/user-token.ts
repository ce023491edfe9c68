// The signed-in user's own code-host token, kept for one purpose: asking the code host which of the
// app's installations that user can see (`GET /user/installations`, which GitHub answers only to a
// user access token of the app), so a team links only an installation its user has access to.
// Console sign-in must therefore use the app's own client id and secret (a GitHub App issues
// `ghu_` user tokens through the same web flow). The token is sealed with the control plane's
// secrets key (AES-256-GCM, server/clouds/secret-box.ts), never logged and never answered; an
// expiring one (8 h on GitHub) is renewed with its refresh token (6 months), one renewal at a time
// per user because a refresh token works once. A token the code host refuses is forgotten.
import { KeyedQueue } from '../../shared/concurrency.ts';
import type { SecretBox } from '../clouds/secret-box.ts';
import type { Config } from '../config/config.ts';
import type { Queryable } from '../db/types.ts';
import { Forbidden } from '../errors.ts';
import { call, type GitHub, HttpFailure } from './github.ts';
import { forgetUserToken, saveSealedUserToken, sealedUserToken } from './store.ts';

/** What GitHub answers to a code exchange or a refresh (expiry fields only for expiring tokens). */
export interface Exchanged {
  access_token?: string;
  expires_in?: number | string;
  refresh_token?: string;
  refresh_token_expires_in?: number | string;
  error?: string;
  error_description?: string;
}

interface Kept {
  token: string;
  /** Epoch ms; 0 when the token does not expire. */
  expiresAt: number;
  refresh: string;
  refreshExpiresAt: number;
}

/** Renewed this long before it expires, so a call never carries a token about to lapse. */
const EARLY_MS = 60_000;
/** `/user/installations` pages read at most (100 each); GitHub's users see far fewer. */
const MAX_PAGES = 20;
const PER_PAGE = 100;

export const SIGN_IN_FIRST =
  'linking an installation needs a user signed in with the code host (console sign-in, GET /auth/codehost/start): the code host says which installations that user can see';
const SIGN_IN_AGAIN =
  'your code-host sign-in has expired or was revoked: sign in with the code host again (GET /auth/codehost/start)';

const seconds = (v: unknown): number => {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : 0;
};

function keptOf(x: Exchanged, at: number): Kept {
  const life = seconds(x.expires_in);
  const refreshLife = seconds(x.refresh_token_expires_in);
  return {
    token: x.access_token ?? '',
    expiresAt: life ? at + life * 1000 : 0,
    refresh: typeof x.refresh_token === 'string' ? x.refresh_token : '',
    refreshExpiresAt: refreshLife ? at + refreshLife * 1000 : 0,
  };
}

export interface UserTokenDeps {
  db: Queryable;
  config: Config;
  github: GitHub;
  secrets: SecretBox;
}

export class UserTokens {
  #d: UserTokenDeps;
  #renewals = new KeyedQueue();

  constructor(d: UserTokenDeps) {
    this.#d = d;
  }

  /**
   * Keeps a sign-in's token sealed; false (nothing kept) without a secrets key, in which case
   * sign-in still works and linking answers 503 naming SVC_SECRETS_KEY.
   */
  async keep(userId: string, x: Exchanged): Promise<boolean> {
    try {
      this.#d.secrets.ready();
    } catch {
      return false;
    }
    await this.#save(userId, keptOf(x, Date.now()));
    return true;
  }

  async #save(userId: string, k: Kept): Promise<void> {
    await saveSealedUserToken(this.#d.db, userId, this.#d.secrets.seal(JSON.stringify(k)));
  }

  async #load(userId: string): Promise<Kept | null> {
    const sealed = await sealedUserToken(this.#d.db, userId);
    if (!sealed) return null;
    const k = JSON.parse(this.#d.secrets.open(sealed)) as Kept;
    return k.token ? k : null;
  }

  /** The user's live token: 403 when there is none or it can no longer be renewed. */
  async #token(userId: string): Promise<string> {
    // Without a secrets key no token could be kept: say which variable, not "sign in".
    this.#d.secrets.ready();
    return this.#renewals.run(userId, async () => {
      const k = await this.#load(userId);
      if (!k) throw new Forbidden(SIGN_IN_FIRST);
      const now = Date.now();
      if (!k.expiresAt || k.expiresAt - EARLY_MS > now) return k.token;
      if (!k.refresh || (k.refreshExpiresAt && k.refreshExpiresAt <= now)) return this.#refused(userId);
      const { config, github } = this.#d;
      const x = await call<Exchanged>('POST', `${github.web}/login/oauth/access_token`, {
        accept: 'application/json',
        body: {
          client_id: config.codehost.clientId,
          client_secret: config.codehost.clientSecret,
          grant_type: 'refresh_token',
          refresh_token: k.refresh,
        },
      });
      if (!x.access_token) return this.#refused(userId);
      await this.#save(userId, keptOf(x, now));
      return x.access_token;
    });
  }

  async #refused(userId: string): Promise<never> {
    await forgetUserToken(this.#d.db, userId);
    throw new Forbidden(SIGN_IN_AGAIN);
  }

  /** Whether installation `id` is among the app's installations the user can see. */
  async canSee(userId: string, id: number): Promise<boolean> {
    const token = await this.#token(userId);
    try {
      for (let page = 1; page <= MAX_PAGES; page++) {
        const got = await call<{ installations?: unknown }>(
          'GET',
          `${this.#d.github.api}/user/installations?per_page=${PER_PAGE}&page=${page}`,
          { token },
        );
        const list = Array.isArray(got?.installations) ? (got.installations as { id?: unknown }[]) : [];
        if (list.some((i) => i?.id === id)) return true;
        if (list.length < PER_PAGE) return false;
      }
      return false;
    } catch (err) {
      if (err instanceof HttpFailure && err.upstreamStatus === 401) return this.#refused(userId);
      throw err;
    }
  }
}
