// Provider tokens must be usable, so unlike keys and sessions they cannot be hashed: they are
// encrypted at rest with AES-256-GCM. The key comes from SVC_SECRETS_KEY (32 bytes,
// base64 or hex), else from a key file created with mode 0600 beside the embedded database on
// first start. A Postgres control plane without SVC_SECRETS_KEY can run, but refuses to store or
// read a provider token, naming the variable.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { NotConfigured } from '../errors.ts';
import { isSecretKey } from './providers.ts';

export const SEALED_PREFIX = 'enc:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** No usable secrets key: a 503 (the feature is not configured) where an API call meets it. */
export class SecretsKeyError extends NotConfigured {}

/** 32 key bytes from base64 (44 chars) or hex (64 chars); throws with the reason otherwise. */
export function parseSecretsKey(text: string, where: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (key.length !== 32) {
    throw new SecretsKeyError(
      `${where}: must be 32 bytes as base64 or hex (e.g. the output of: openssl rand -base64 32)`,
    );
  }
  return key;
}

export class SecretBox {
  readonly #key: Buffer | null;
  /** Where the key came from, for the one start-up log line (never the key). */
  readonly source: string;

  constructor(key: Buffer | null, source: string) {
    this.#key = key;
    this.source = source;
  }

  /**
   * SVC_SECRETS_KEY wins; else `<db>.key` beside an embedded database (created 0600 when
   * missing); a Postgres DSN without the variable gets a box that refuses to seal or open.
   */
  static load(secretsKey: string, db: string): SecretBox {
    if (secretsKey) return new SecretBox(parseSecretsKey(secretsKey, 'SVC_SECRETS_KEY'), 'SVC_SECRETS_KEY');
    if (/^postgres(ql)?:\/\//i.test(db)) return new SecretBox(null, 'none');
    const file = `${db}.key`;
    if (!existsSync(file)) {
      // 'wx' fails if another process created it meanwhile; then that key is read below.
      try {
        writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
    }
    return new SecretBox(parseSecretsKey(readFileSync(file, 'utf8'), file), file);
  }

  #need(): Buffer {
    if (!this.#key) {
      throw new SecretsKeyError(
        'provider tokens are encrypted at rest: set SVC_SECRETS_KEY (32 bytes, base64) for a Postgres database',
      );
    }
    return this.#key;
  }

  /** Throws SecretsKeyError when there is no key (checked before a provider is called). */
  ready(): void {
    this.#need();
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES);
    const c = createCipheriv('aes-256-gcm', this.#need(), iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return SEALED_PREFIX + Buffer.concat([iv, c.getAuthTag(), body]).toString('base64');
  }

  open(sealed: string): string {
    if (!sealed.startsWith(SEALED_PREFIX)) return sealed;
    const raw = Buffer.from(sealed.slice(SEALED_PREFIX.length), 'base64');
    try {
      const d = createDecipheriv('aes-256-gcm', this.#need(), raw.subarray(0, IV_BYTES));
      d.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([d.update(raw.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
    } catch (err) {
      if (err instanceof SecretsKeyError) throw err;
      throw new SecretsKeyError(
        'a stored provider token cannot be decrypted: the secrets key changed (SVC_SECRETS_KEY or the key file)',
      );
    }
  }

  /** Every secret-named string value sealed (values already sealed are left as they are). */
  sealConfig(config: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(config)) {
      out[k] =
        isSecretKey(k) && typeof v === 'string' && v && !v.startsWith(SEALED_PREFIX) ? this.seal(v) : v;
    }
    return out;
  }

  openConfig(config: Record<string, unknown>): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(config)) out[k] = typeof v === 'string' ? this.open(v) : String(v);
    return out;
  }

  /** True when the config holds a secret value still in clear. */
  static hasPlainSecret(config: Record<string, unknown>): boolean {
    return Object.entries(config).some(
      ([k, v]) => isSecretKey(k) && typeof v === 'string' && v !== '' && !v.startsWith(SEALED_PREFIX),
    );
  }
}
