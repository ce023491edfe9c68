// The CLI's device flow (spec "Sign-in, teams and keys", RFC 8628 in spirit): `code` starts a
// login, a signed-in user `approve`s the user code for one of their teams, and `token` hands the
// minted API key to the CLI exactly once. Device and user codes are stored only as hashes; the
// approved key waits for at most 15 minutes in the database sealed to the device code
// (device-seal.ts), so every step may reach a different control-plane replica and no reader of the
// database can take the key. Unknown user codes are counted per user in the database (cluster/store.ts).
import { randomInt } from 'node:crypto';
import { newSecret, PREFIX } from '../../protocol/ids.ts';
import { hitWindow, peekWindow } from '../cluster/store.ts';
import type { Db } from '../db/types.ts';
import { BadRequest, Conflict, Forbidden, Gone, PreconditionRequired, TooManyRequests } from '../errors.ts';
import type { Caller } from './auth.ts';
import { openWith, sealKeyOf, sealTo } from './device-seal.ts';
import {
  approveDeviceCode,
  type DeviceRow,
  deviceCodeByHash,
  deviceCodeByUserCode,
  dropDeviceCodesBefore,
  insertDeviceCode,
  markDeviceCodeDelivered,
} from './device-store.ts';
import { hashSecret } from './secrets.ts';
import { createKey, getTeam, revokeApiKey, type Team } from './store.ts';
import { isMember } from './user-store.ts';

export const DEVICE_CODE_TTL_SEC = 900;
export const POLL_INTERVAL_SEC = 5;
export const APPROVED_KEY_HOLD_MS = 15 * 60 * 1000;
/**
 * Unknown user codes one user may try before approvals lock for WRONG_CODE_LOCK_MS: user codes are
 * short, so unbounded tries could find someone else's pending code.
 */
export const MAX_WRONG_CODES = 5;
export const WRONG_CODE_LOCK_MS = 15 * 60 * 1000;

/** No vowels (no words), no 0/O/1/I/L look-alikes: easy to read aloud and to type. */
export const USER_CODE_ALPHABET = 'BCDFGHJKMNPQRSTVWXZ';

export interface DeviceCode {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

function newUserCode(): string {
  let s = '';
  for (let i = 0; i < 8; i++) s += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return `${s.slice(0, 4)}-${s.slice(4)}`;
}

/** `bcdf ghjk`, `BCDFGHJK` and `BCDF-GHJK` are the same code; null when it cannot be one. */
export function normaliseUserCode(input: string): string | null {
  const s = input.toUpperCase().replace(/[\s-]/g, '');
  if (s.length !== 8 || [...s].some((c) => !USER_CODE_ALPHABET.includes(c))) return null;
  return `${s.slice(0, 4)}-${s.slice(4)}`;
}

const expired = (r: DeviceRow, at = Date.now()) => Date.parse(r.expires_at) <= at;
/** The rate window of a user's unknown user codes: guessing a code is locked out. */
const wrongKey = (userId: string) => `device-wrong:${userId}`;

export class DeviceFlow {
  #db: Db;
  #verificationUri: () => string;

  /** `verificationUri` is read per request: the public URL may be set after start (tests). */
  constructor(db: Db, verificationUri: () => string) {
    this.#db = db;
    this.#verificationUri = verificationUri;
  }

  async start(): Promise<DeviceCode> {
    const deviceCode = newSecret(PREFIX.deviceCode);
    const created = Date.now();
    // Rows are useless once expired and past the key hold; dropping them keeps user codes unique.
    const stale = new Date(created - DEVICE_CODE_TTL_SEC * 1000 - APPROVED_KEY_HOLD_MS).toISOString();
    await dropDeviceCodesBefore(this.#db, stale);
    for (;;) {
      const userCode = newUserCode();
      // A user code is short, so it may collide with a live one; the UNIQUE index says so.
      const inserted = await insertDeviceCode(this.#db, {
        codeHash: hashSecret(deviceCode),
        userCodeHash: hashSecret(userCode),
        createdAt: new Date(created).toISOString(),
        expiresAt: new Date(created + DEVICE_CODE_TTL_SEC * 1000).toISOString(),
        sealPub: sealKeyOf(deviceCode),
      }).then(
        () => true,
        async (err) => {
          if (await this.#userCodeTaken(userCode)) return false;
          throw err;
        },
      );
      if (!inserted) continue;
      const uri = this.#verificationUri();
      const complete = new URL(uri);
      complete.searchParams.set('user_code', userCode);
      return {
        device_code: deviceCode,
        user_code: userCode,
        verification_uri: uri,
        verification_uri_complete: complete.toString(),
        expires_in: DEVICE_CODE_TTL_SEC,
        interval: POLL_INTERVAL_SEC,
      };
    }
  }

  async #userCodeTaken(userCode: string): Promise<boolean> {
    return (await deviceCodeByUserCode(this.#db, hashSecret(userCode))) !== undefined;
  }

  /**
   * Approves a pending code for `teamId`: 400 unknown or expired code, 409 already approved,
   * 403 when the caller is not a member of the team. Mints the key in the same transaction.
   */
  async approve(
    caller: Caller,
    userCodeInput: string,
    teamId: string,
    name: string | undefined,
  ): Promise<{ approved: true; key_id: string; team_id: string }> {
    const userCode = normaliseUserCode(userCodeInput);
    if (!userCode) throw new BadRequest('user_code must look like XXXX-XXXX (the code the CLI printed)');
    const userId = caller.userId as string;
    const at = Date.now();
    const wrong = await peekWindow(this.#db, wrongKey(userId), at);
    if (wrong.count >= MAX_WRONG_CODES) {
      throw new TooManyRequests(
        `too many unknown user codes; approvals are locked for ${Math.ceil((wrong.resetAt - at) / 60_000)} min`,
        (wrong.resetAt - at) / 1000,
      );
    }
    const row = await deviceCodeByUserCode(this.#db, hashSecret(userCode));
    if (!row) {
      await hitWindow(this.#db, wrongKey(userId), WRONG_CODE_LOCK_MS);
      throw new BadRequest('unknown user code: check the code the CLI printed');
    }
    const keyId = await this.#db.transaction(async (tx) => {
      if (row.status !== 'pending') throw new Conflict('this user code was already approved');
      if (expired(row)) throw new BadRequest('this user code expired: run svc login again');
      if (!row.seal_pub) throw new BadRequest('this user code is from an older server: run svc login again');
      if (!(await isMember(tx, teamId, userId))) throw new Forbidden('not a member of that team');
      const { key, apiKey } = await createKey(tx, teamId, name?.trim() || 'cli', userId);
      const approved = await approveDeviceCode(tx, row.code_hash, {
        teamId,
        keyId: key.ID,
        sealedKey: sealTo(row.seal_pub, apiKey),
        heldUntil: new Date(Date.now() + APPROVED_KEY_HOLD_MS).toISOString(),
      });
      if (!approved) throw new Conflict('this user code was already approved');
      return key.ID;
    });
    return { approved: true, key_id: keyId, team_id: teamId };
  }

  /**
   * The CLI's poll: 400 `invalid_device_code` unknown, 400 `expired_token` expired while pending,
   * 428 `authorization_pending` before approval, 410 once the key was handed out (or is no
   * longer held), else the key, exactly once.
   */
  async token(deviceCode: string): Promise<{ api_key: string; team: Team }> {
    const codeHash = hashSecret(deviceCode);
    const row = await deviceCodeByHash(this.#db, codeHash);
    if (!row) throw new BadRequest('invalid_device_code');
    if (row.status === 'pending') {
      if (expired(row)) throw new BadRequest('expired_token');
      throw new PreconditionRequired('authorization_pending');
    }
    if (row.status === 'delivered') throw new Gone('the key for this device code was already handed out');
    // Whoever marks it delivered hands it out: two polls racing (on two replicas) get one key.
    if (!(await markDeviceCodeDelivered(this.#db, codeHash)))
      throw new Gone('the key for this device code was already handed out');
    const apiKey =
      Date.parse(row.held_until) > Date.now() && row.sealed_key ? openWith(deviceCode, row.sealed_key) : null;
    const team = row.team_id ? await getTeam(this.#db, row.team_id) : undefined;
    if (!apiKey || !team) {
      // Approved, but no longer to be handed out (15 minutes passed): the key can never reach
      // the CLI, so it must not stay valid either.
      if (row.key_id) await revokeApiKey(this.#db, row.key_id);
      throw new Gone('the approved key is no longer held (15 minutes passed): run svc login again');
    }
    return { api_key: apiKey, team };
  }
}
