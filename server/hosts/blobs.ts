// Archives larger than fit in one stream frame (16 MiB read limit, and base64 grows data by a
// third) travel over plain HTTPS instead: the control plane parks the bytes under a one-time
// token and the sidecar, which only ever dials out, fetches or uploads them. Tokens are held in
// memory only, hashed, single use, and expire after 10 minutes.

import { createReadStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { finished, type Readable } from 'node:stream';
import { MAX_ARCHIVE_BYTES } from '../../protocol/commands.ts';
import { newId, newSecret } from '../../protocol/ids.ts';
import { NotFound, TooLarge, Unauthorized } from '../errors.ts';
import type { App } from '../http/app.ts';
import { hashSecret, sameHash } from '../identity/secrets.ts';

export const BLOB_TTL_MS = 10 * 60_000;
/** Archives up to this size go inline as `tar_b64`; larger ones by blob URL. */
export const INLINE_ARCHIVE_BYTES = 8 * 1024 * 1024;
export const BLOB_PATH = '/v1/hosts/blobs';

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

export class Blobs {
  #blobs = new Map<string, Blob>();
  #base: () => string;

  constructor(baseUrl: () => string) {
    this.#base = baseUrl;
  }

  #put(blob: Omit<Blob, 'tokenHash' | 'expires'>): BlobRef {
    this.#sweep();
    const id = newId('blob_');
    const token = newSecret('dbt_');
    this.#blobs.set(id, { ...blob, tokenHash: hashSecret(token), expires: Date.now() + BLOB_TTL_MS });
    return { url: `${this.#base()}${BLOB_PATH}/${id}`, token };
  }

  /** Parks bytes for a host to download once. */
  offer(data: Buffer): BlobRef {
    return this.#put({ data, direction: 'download' });
  }

  /** Parks a file on disk for a host to download once, streamed (never read into memory). */
  offerFile(path: string): BlobRef {
    return this.#put({ data: null, file: path, direction: 'download' });
  }

  /** Parks a stream of `size` bytes for a host to download once, as it arrives (a file a client PUTs). */
  offerStream(stream: Readable, size: number): BlobRef {
    return this.#put({ data: null, stream, size, direction: 'download' });
  }

  /** Forgets a parked blob that will not be fetched (the command failed first). */
  drop(ref: BlobRef): void {
    this.#blobs.delete(ref.url.slice(ref.url.lastIndexOf('/') + 1));
  }

  /** A place a host may PUT a stream to once (`<url>` ends in `/stream`); see StreamUpload. */
  expectStream(): StreamUpload {
    let arrive!: (req: IncomingMessage) => void;
    const arrived = new Promise<IncomingMessage>((r) => {
      arrive = r;
    });
    const ref = this.#put({ data: null, direction: 'upload', arrive });
    const id = ref.url.slice(ref.url.lastIndexOf('/') + 1);
    return { url: `${ref.url}/stream`, token: ref.token, arrived, cancel: () => this.#blobs.delete(id) };
  }

  /** A place a host may upload once; `received` resolves with the bytes. */
  expect(): BlobRef & { received: Promise<Buffer> } {
    let resolve!: (b: Buffer) => void;
    const received = new Promise<Buffer>((r) => {
      resolve = r;
    });
    return { ...this.#put({ data: null, direction: 'upload', resolve }), received };
  }

  #check(id: string, authorization: string | undefined, direction: Blob['direction']): Blob {
    const blob = this.#blobs.get(id);
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1] ?? '';
    if (!blob || blob.direction !== direction || blob.expires < Date.now())
      throw new NotFound('no such blob');
    if (!sameHash(hashSecret(token), blob.tokenHash)) throw new Unauthorized('bad blob token');
    return blob;
  }

  #take(id: string, authorization: string | undefined, direction: Blob['direction']): Blob {
    const blob = this.#check(id, authorization, direction);
    this.#blobs.delete(id);
    return blob;
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
        const blob = this.#take(req.params.id, req.headers.authorization, 'download');
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
            this.#check((req.params as { id: string }).id, req.headers.authorization, 'upload');
          },
        },
        async (req) => {
          const blob = this.#take(req.params.id, req.headers.authorization, 'upload');
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
            this.#check((req.params as { id: string }).id, req.headers.authorization, 'upload');
          },
        },
        async (req) => {
          const blob = this.#take(req.params.id, req.headers.authorization, 'upload');
          const body = req.body as Buffer;
          if (body.length > MAX_ARCHIVE_BYTES) throw new TooLarge('archive larger than 32 MiB');
          blob.resolve?.(body);
          return { ok: true, bytes: body.length };
        },
      );
    });
  }
}
