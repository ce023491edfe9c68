// What `POST /webhooks/codehost` checks before it holds any byte of a body: the app and the secret
// are configured, the content type is JSON (the app's webhook must be set to application/json), the
// X-Hub-Signature-256 header is `sha256=` and 64 lowercase hex digits, the event and delivery
// headers are there, the declared length is within the limit, and a slot is free (a few bodies at
// once per client address, a bounded number process-wide). Only then is the body read, with the
// HMAC updated chunk by chunk, within the byte limit and GitHub's own 10 s delivery timeout; a
// body whose signature is not the header's is refused and dropped without being parsed.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Config } from '../config/config.ts';
import { BadRequest, NotConfigured, SvcError, TooLarge, TooManyRequests, Unauthorized } from '../errors.ts';
import { requireApp, WEBHOOK_OFF } from './codehost.ts';

/** Spec "Limits": webhook bodies up to 2 MiB. */
export const WEBHOOK_BODY_LIMIT = 2 * 1024 * 1024;
/** GitHub gives up on a delivery after 10 s; a body still arriving then is no delivery of its. */
export const WEBHOOK_READ_MS = 10_000;
/** Bodies read at once from one client address, and in all (so at most 64 MiB held). */
export const WEBHOOK_SLOTS_PER_ADDRESS = 4;
export const WEBHOOK_SLOTS = 32;

const SIGNATURE_LENGTH = 'sha256='.length + 64;

export interface WebhookHeaders {
  event: string;
  id: string;
  signature: string;
}

const header = (v: string | string[] | undefined): string => (Array.isArray(v) ? (v[0] ?? '') : (v ?? ''));

function isLowerHex(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/** The configured secret, or 503 naming what to set. */
export function webhookSecret(config: Config): string {
  requireApp(config);
  if (!config.codehost.webhookSecret) throw new NotConfigured(WEBHOOK_OFF);
  return config.codehost.webhookSecret;
}

/** Every refusal the headers alone decide, in the order a caller would fix them. */
export function checkWebhookHeaders(
  config: Config,
  headers: Record<string, string | string[] | undefined>,
): WebhookHeaders {
  webhookSecret(config);
  const type = header(headers['content-type']).split(';')[0].trim().toLowerCase();
  if (type !== 'application/json')
    throw new SvcError(
      415,
      `webhook content type must be application/json (set the app's webhook content type to JSON), not '${type.slice(0, 100)}'`,
    );
  const signature = header(headers['x-hub-signature-256']);
  if (!signature) throw new Unauthorized('webhook without X-Hub-Signature-256');
  if (
    signature.length !== SIGNATURE_LENGTH ||
    !signature.startsWith('sha256=') ||
    !isLowerHex(signature.slice(7))
  )
    throw new Unauthorized('malformed X-Hub-Signature-256: expected sha256= and 64 lowercase hex digits');
  const id = header(headers['x-github-delivery']);
  if (!id || id.length > 128) throw new BadRequest('webhook without X-GitHub-Delivery');
  const event = header(headers['x-github-event']);
  if (!event || event.length > 64) throw new BadRequest('webhook without X-GitHub-Event');
  const declared = Number(header(headers['content-length']) || 0);
  if (declared > WEBHOOK_BODY_LIMIT)
    throw new TooLarge(`webhook body over ${WEBHOOK_BODY_LIMIT} bytes (declared ${declared})`);
  return { event, id, signature };
}

/** One server's bounds on bodies being read: slots per client address and in all, and the time. */
export class WebhookIntake {
  #total = 0;
  #byAddress = new Map<string, number>();
  perAddress = WEBHOOK_SLOTS_PER_ADDRESS;
  total = WEBHOOK_SLOTS;
  /** Tests shorten it to see the bound pass. */
  readMs = WEBHOOK_READ_MS;

  /** A slot for `address`, or 429 (this address) / 503 (everyone); the release runs once. */
  take(address: string): () => void {
    const mine = this.#byAddress.get(address) ?? 0;
    if (mine >= this.perAddress)
      throw new TooManyRequests(`more than ${this.perAddress} webhook bodies at once from this address`, 1);
    if (this.#total >= this.total)
      throw new SvcError(503, `more than ${this.total} webhook bodies being received; retry shortly`);
    this.#total++;
    this.#byAddress.set(address, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total--;
      const left = (this.#byAddress.get(address) ?? 1) - 1;
      if (left > 0) this.#byAddress.set(address, left);
      else this.#byAddress.delete(address);
    };
  }

  get inUse(): number {
    return this.#total;
  }
}

/**
 * The body's bytes once they are all in and signed by `signature`: 413 past the limit, 408 when
 * they do not arrive in time, 401 on a mismatch, 400 when the client goes away. Whatever happens,
 * nothing read is kept and no listener is left behind.
 */
export function readSigned(
  src: Readable,
  secret: string,
  signature: string,
  o: { limit?: number; timeoutMs?: number } = {},
): Promise<Buffer> {
  const limit = o.limit ?? WEBHOOK_BODY_LIMIT;
  const timeoutMs = o.timeoutMs ?? WEBHOOK_READ_MS;
  return new Promise((resolve, reject) => {
    const hmac = createHmac('sha256', secret);
    let chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (err: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      src.off('data', onData);
      src.off('end', onEnd);
      src.off('error', onError);
      src.off('close', onClose);
      const body = err ? null : Buffer.concat(chunks, size);
      chunks = [];
      if (body) resolve(body);
      else reject(err);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) return finish(new TooLarge(`webhook body over ${limit} bytes`));
      hmac.update(c);
      chunks.push(c);
    };
    const onEnd = () => {
      const want = Buffer.from(`sha256=${hmac.digest('hex')}`);
      const got = Buffer.from(signature);
      const same = got.length === want.length && timingSafeEqual(got, want);
      finish(same ? null : new Unauthorized('webhook signature mismatch'));
    };
    const onError = (err: Error) => finish(new BadRequest(`webhook body not received: ${err.message}`));
    const onClose = () => finish(new BadRequest('webhook body not received: the connection closed'));
    const timer = setTimeout(
      () => finish(new SvcError(408, `webhook body not received within ${timeoutMs / 1000} s`)),
      timeoutMs,
    );
    src.on('data', onData);
    src.once('end', onEnd);
    src.once('error', onError);
    src.once('close', onClose);
  });
}
