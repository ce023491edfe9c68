// Archives larger than fit in one stream frame (16 MiB read limit, and base64 grows data by a
// third) travel over plain HTTPS instead: the control plane parks the bytes under a one-time
// token and the sidecar, which only ever dials out, fetches or uploads them. Tokens are hashed,
// single use, and expire after 10 minutes. The bytes stay in the memory of the replica that parked
// them; the token's hash and that replica's address are in the database, so a host's request that
// the balancer sends to another replica is relayed to the holder (blob-relay.ts).

import { createReadStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { finished, Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { MAX_ARCHIVE_BYTES } from '../../protocol/commands.ts';
import { newId, newSecret } from '../../protocol/ids.ts';
import { dropExpired } from '../cluster/store.ts';
import type { Db } from '../db/types.ts';
import { NotFound, TooLarge, Unauthorized } from '../errors.ts';
import type { App } from '../http/app.ts';
import { hashSecret, sameHash } from '../identity/secrets.ts';
import { RELAYED, relay } from './blob-relay.ts';
import { blobToken, deleteBlobToken, insertBlobToken } from './blob-store.ts';

export const BLOB_TTL_MS = 10 * 60_000;
/** Archives up to this size go inline as `tar_b64`; larger ones by blob URL. */
export const INLINE_ARCHIVE_BYTES = 8 * 1024 * 1024;
export const BLOB_PATH = '/v1/hosts/blobs';
const CLEANUP_EVERY_MS = 60_000;

interface Blob {
  tokenHash: string;
  data: Buffer | null;
  /** A file streamed from disk instead of `data` (project contexts, up to 512 MiB). */
  file?: string;
  /** A stream handed over as it arrives (single files and watch events, never buffered here). */
  stream?: Readable;
  size?: number;
  direction: 'download' | 'upload';
  expires: number;
  resolve?: (b: Buffer) => void;
  arrive?: (req: IncomingMessage) => void;
}

/** A place a host PUTs a stream to once; `arrived` gives the request as soon as it starts. */
export interface StreamUpload extends BlobRef {
  arrived: Promise<IncomingMessage>;
  /** Forgets the place (nobody will read what arrives). */
  cancel(): void;
}

export interface BlobRef {
  url: string;
  token: string;
}

/** Where a blob's request is answered: here, from memory, or by the replica holding it. */
type Located = { blob: Blob; holder?: undefined } | { blob?: undefined; holder: string };

const tokenOf = (authorization: string | undefined) =>
  /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1] ?? '';

export class Blobs {
  #blobs = new Map<string, Blob>();
  #cleaned = 0;
  readonly #db: Db;
  #base: () => string;
  #self: () => string;

  /**
   * `baseUrl`: where hosts reach the control plane (the balancer); `selfUrl`: where the other
   * replicas reach this one (Config.replicaUrl, else where it listens).
   */
  constructor(db: Db, baseUrl: () => string, selfUrl: () => string) {
    this.#db = db;
    this.#base = baseUrl;
    this.#self = selfUrl;
  }

  async #put(blob: Omit<Blob, 'tokenHash' | 'expires'>): Promise<BlobRef> {
    this.#sweep();
    const id = newId('blob_');
    const token = newSecret('dbt_');
    const at = Date.now();
    const tokenHash = hashSecret(token);
    this.#blobs.set(id, { ...blob, tokenHash, expires: at + BLOB_TTL_MS });
    try {
      // Rows of blobs never fetched: a bounded batch, at most once a minute per replica (not a
      // round trip on every transfer).
      if (at - this.#cleaned >= CLEANUP_EVERY_MS) {
        this.#cleaned = at;
        await dropExpired(this.#db, 'blob_tokens', 'id', 'expires_at', new Date(at).toISOString());
      }
      await insertBlobToken(this.#db, id, {
        tokenHash,
        direction: blob.direction,
        holderUrl: this.#self(),
        expiresAt: new Date(at + BLOB_TTL_MS).toISOString(),
      });
    } catch (err) {
      this.#blobs.delete(id);
      throw err;
    }
    return { url: `${this.#base()}${BLOB_PATH}/${id}`, token };
  }

  #forget(id: string): void {
    this.#blobs.delete(id);
    // The token must not be relayed to us any more; a failure leaves a row that expires.
    deleteBlobToken(this.#db, id).catch(() => {});
  }

  /** Parks bytes for a host to download once. */
  offer(data: Buffer): Promise<BlobRef> {
    return this.#put({ data, direction: 'download' });
  }

  /** Parks a file on disk for a host to download once, streamed (never read into memory). */
  offerFile(path: string): Promise<BlobRef> {
    return this.#put({ data: null, file: path, direction: 'download' });
  }

  /** Parks a stream of `size` bytes for a host to download once, as it arrives (a file a client PUTs). */
  offerStream(stream: Readable, size: number): Promise<BlobRef> {
    return this.#put({ data: null, stream, size, direction: 'download' });
  }

  /** Forgets a parked blob that will not be fetched (the command failed first). */
  drop(ref: BlobRef): void {
    this.#forget(ref.url.slice(ref.url.lastIndexOf('/') + 1));
  }

  /** A place a host may PUT a stream to once (`<url>` ends in `/stream`); see StreamUpload. */
  async expectStream(): Promise<StreamUpload> {
    let arrive!: (req: IncomingMessage) => void;
    const arrived = new Promise<IncomingMessage>((r) => {
      arrive = r;
    });
    const ref = await this.#put({ data: null, direction: 'upload', arrive });
    const id = ref.url.slice(ref.url.lastIndexOf('/') + 1);
    return { url: `${ref.url}/stream`, token: ref.token, arrived, cancel: () => this.#forget(id) };
  }

  /** A place a host may upload once; `received` resolves with the bytes. */
  async expect(): Promise<BlobRef & { received: Promise<Buffer> }> {
    let resolve!: (b: Buffer) => void;
    const received = new Promise<Buffer>((r) => {
      resolve = r;
    });
    return { ...(await this.#put({ data: null, direction: 'upload', resolve })), received };
  }

  /**
   * The blob if this replica holds it, else the replica that does (from the token's row): 404 for
   * an unknown, expired or used token, 401 for a wrong one. A relayed request is answered only
   * from memory (never passed on again).
   */
  async #locate(req: FastifyRequest, direction: Blob['direction']): Promise<Located> {
    const id = (req.params as { id: string }).id;
    const hash = hashSecret(tokenOf(req.headers.authorization));
    const blob = this.#blobs.get(id);
    if (blob) {
      if (blob.direction !== direction || blob.expires < Date.now()) throw new NotFound('no such blob');
      if (!sameHash(hash, blob.tokenHash)) throw new Unauthorized('bad blob token');
      return { blob };
    }
    if (req.headers[RELAYED] !== undefined || id.length > 64) throw new NotFound('no such blob');
    const row = await blobToken(this.#db, id);
    if (
      !row ||
      row.direction !== direction ||
      Date.parse(row.expires_at) < Date.now() ||
      row.holder_url === this.#self()
    )
      throw new NotFound('no such blob');
    if (!sameHash(hash, row.token_hash)) throw new Unauthorized('bad blob token');
    return { holder: row.holder_url };
  }

  #take(id: string, blob: Blob): Blob {
    this.#forget(id);
    return blob;
  }

  /** Hands the request to the holder and answers with what it answered. */
  async #relay(req: FastifyRequest, reply: FastifyReply, holder: string, body?: Buffer | Readable) {
    const cut = new AbortController();
    reply.raw.once('close', () => cut.abort());
    const length = req.headers['content-length'];
    const r = await relay(
      `${holder.replace(/\/+$/, '')}${req.url}`,
      {
        method: req.method === 'PUT' ? 'PUT' : 'GET',
        authorization: req.headers.authorization ?? '',
        body,
        length: typeof length === 'string' && body instanceof Readable ? length : undefined,
      },
      cut.signal,
    );
    reply.code(r.status);
    for (const h of ['content-type', 'content-length', 'retry-after'])
      if (r.headers.has(h)) reply.header(h, r.headers.get(h));
    return reply.send(r.body ?? '');
  }

  #sweep(): void {
    const now = Date.now();
    for (const [id, b] of this.#blobs) if (b.expires < now) this.#blobs.delete(id);
  }

  routes(app: App): void {
    app.get<{ Params: { id: string } }>(
      `${BLOB_PATH}/:id`,
      { config: { auth: 'none' }, schema: { hide: true } },
      async (req, reply) => {
        const at = await this.#locate(req, 'download');
        if (at.holder) return this.#relay(req, reply, at.holder);
        const blob = this.#take(req.params.id, at.blob as Blob);
        reply.type('application/octet-stream');
        if (blob.stream) return reply.header('content-length', blob.size).send(blob.stream);
        return blob.file ? reply.send(createReadStream(blob.file)) : blob.data;
      },
    );
    app.register(async (scope) => {
      // The body stays a stream, of any type: the blob's reader consumes it.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
      scope.put<{ Params: { id: string } }>(
        `${BLOB_PATH}/:id/stream`,
        {
          config: { auth: 'none', slowBody: true },
          schema: { hide: true },
          onRequest: async (req) => {
            await this.#locate(req, 'upload');
          },
        },
        async (req, reply) => {
          const at = await this.#locate(req, 'upload');
          if (at.holder) return this.#relay(req, reply, at.holder, req.body as Readable);
          const blob = this.#take(req.params.id, at.blob as Blob);
          if (!blob.arrive) throw new NotFound('no such blob');
          // The reader (a client's download, a watch's events) consumes the request itself; the
          // host is answered once it has been read to its end, or cut when the reader left.
          blob.arrive(req.raw);
          await new Promise<void>((resolve) => finished(req.raw, () => resolve()));
          return { ok: true };
        },
      );
    });
    app.register(async (scope) => {
      scope.addContentTypeParser(
        '*',
        { parseAs: 'buffer', bodyLimit: MAX_ARCHIVE_BYTES + 1024 },
        (_req, body, done) => done(null, body),
      );
      scope.put<{ Params: { id: string } }>(
        `${BLOB_PATH}/:id`,
        {
          config: { auth: 'none' },
          schema: { hide: true },
          // The one-time token is checked before 32 MiB of body is read from an unknown client.
          onRequest: async (req) => {
            await this.#locate(req, 'upload');
          },
        },
        async (req, reply) => {
          const body = req.body as Buffer;
          if (body.length > MAX_ARCHIVE_BYTES) throw new TooLarge('archive larger than 32 MiB');
          const at = await this.#locate(req, 'upload');
          if (at.holder) return this.#relay(req, reply, at.holder, body);
          const blob = this.#take(req.params.id, at.blob as Blob);
          blob.resolve?.(body);
          return { ok: true, bytes: body.length };
        },
      );
    });
  }
}
