// PUT /v1/uploads bounds what one team can make the server read, check and keep: other content
// types are refused before a byte of the body is read (415), archives are checked within an
// unpacked-bytes bound that counts every block and within a time bound, each team keeps at most
// its quota (SVC_UPLOADS_QUOTA, SVC_UPLOADS_QUOTA_COUNT; 413), and a slow upload is cut only when
// it stalls. Only the HTTP layer and the store are exercised, so one storage dialect is enough.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { assertError } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { tarOf } from '../support/tar.ts';

const KiB = 1024;
const MiB = 1024 * KiB;

/** A raw tar of one file of `size` random bytes: incompressible, and new bytes every time. */
const randomTar = (size: number) => tarOf({ 'ctx/data.bin': randomBytes(size) });

const upload = (s: TestServer, data: Buffer, type = 'application/x-tar') =>
  s.req('PUT', '/v1/uploads', { raw: data, headers: { 'content-type': type } });

interface Raw {
  /** Everything the server wrote until its answer was complete or it closed the connection. */
  text: string;
  status: number | null;
  body: string;
}

/**
 * A PUT over a bare socket: the headers (with `length` declared), then `pieces` of the body with
 * `gapMs` between them, never more. Resolves with the server's answer as soon as it is complete
 * (Content-Length read), or with what it wrote before it closed the connection.
 */
function rawPut(
  s: TestServer,
  path: string,
  o: { type?: string; length: number; pieces: Buffer[]; gapMs?: number; key?: string },
): Promise<Raw> {
  const url = new URL(s.url);
  return new Promise((resolve) => {
    const sock = connect(Number(url.port), url.hostname);
    let text = '';
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      sock.destroy();
      const at = text.indexOf('\r\n\r\n');
      resolve({
        text,
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]) || null,
        body: at < 0 ? '' : text.slice(at + 4),
      });
    };
    sock.on('data', (c) => {
      text += c.toString('latin1');
      const at = text.indexOf('\r\n\r\n');
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text)?.[1] ?? Number.NaN);
      if (at >= 0 && text.length - at - 4 >= length) finish();
    });
    sock.on('error', () => {});
    sock.on('close', finish);
    sock.once('connect', async () => {
      const type = o.type === undefined ? '' : `content-type: ${o.type}\r\n`;
      sock.write(
        `PUT ${path} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${o.key ?? s.key}\r\n` +
          `${type}content-length: ${o.length}\r\n\r\n`,
      );
      for (const piece of o.pieces) {
        if (settled) return;
        sock.write(piece);
        if (o.gapMs) await new Promise((r) => setTimeout(r, o.gapMs));
      }
    });
  });
}

const json = (r: Raw) => JSON.parse(r.body) as { error: string };
const alive = async (s: TestServer) => assert.equal((await fetch(`${s.url}/health`)).status, 200);

describe('other content types are refused before the body is read', () => {
  let s: TestServer;
  before(async () => {
    // Short enough that a server waiting for the body answers 408 instead, and the test says so.
    s = await startTestServer(
      'sqlite',
      {},
      { limits: { requestTimeoutMs: 3000, uploadIdleTimeoutMs: 3000 } },
    );
  });
  after(() => s.close());

  test('a declared 300 MiB JSON or text body to PUT /v1/uploads: 415 naming the accepted types', async () => {
    for (const type of ['application/json', 'text/plain; charset=utf-8', undefined]) {
      const r = await rawPut(s, '/v1/uploads', {
        type,
        length: 300 * MiB,
        pieces: [Buffer.alloc(KiB, 0x7b)],
      });
      assert.equal(r.status, 415, `${type}: ${r.text.slice(0, 200)}`);
      assert.match(json(r).error, /send the archive as application\/x-tar, application\/gzip/);
      assert.match(json(r).error, type ? new RegExp(`got '${type.split(';')[0]}'`) : /no content type/);
    }
    // A bad key is still told first, and nothing was stored.
    const bad = await rawPut(s, '/v1/uploads', {
      type: 'application/json',
      length: 300 * MiB,
      pieces: [Buffer.alloc(KiB)],
      key: 'dak_not-a-real-key-0000000000',
    });
    assert.equal(bad.status, 401, bad.text.slice(0, 200));
    assert.equal((await s.server.ctx.db.all('SELECT id FROM uploads')).length, 0);
    await alive(s);
  });

  test('a JSON body to the 32 MiB files route is refused before it is read, not parsed', async () => {
    const r = await rawPut(s, '/v1/envs/env_none/files?service=app&path=/data', {
      type: 'application/json',
      length: 32 * MiB,
      pieces: [Buffer.from('{"a":')],
    });
    assert.equal(r.status, 400, r.text.slice(0, 200));
    assert.match(json(r).error, /send the tar archive as application\/x-tar \(got 'application\/json'\)/);
  });
});

describe('archive checks are bounded by the configured limits', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite');
    // Scaled down for the test, on this server's configuration only.
    s.server.ctx.config.uploads.maxUnpackedBytes = 4 * MiB;
  });
  after(() => s.close());

  test('8 MiB of gzipped zero blocks (8 KiB sent) is refused with 413 and not stored', async () => {
    const bomb = gzipSync(Buffer.concat([await tarOf({ a: 'x' }), Buffer.alloc(8 * MiB)]));
    const r = await upload(s, bomb, 'application/gzip');
    assertError(r, 413, 'unpacks to more than 4 MiB');
    assert.equal((await s.server.ctx.db.all('SELECT id FROM uploads')).length, 0);
    assert.deepEqual(readdirSync(s.server.ctx.config.uploadsDir), []);
    // An archive within the bound is taken.
    assert.equal((await upload(s, await randomTar(64 * KiB))).status, 201);
  });
});

describe('a team keeps at most its upload quota (SVC_UPLOADS_QUOTA)', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_UPLOADS_QUOTA: '1' });
  });
  after(() => s.close());

  test('past 1 MiB: 413 naming the quota; the same bytes again still answer; nothing half-kept', async () => {
    const first = await randomTar(400 * KiB);
    const a = await upload(s, first);
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal((await upload(s, await randomTar(400 * KiB))).status, 201);
    const over = await upload(s, await randomTar(400 * KiB));
    assertError(
      over,
      413,
      /^upload quota: the team keeps 2 uploads of \d+ KiB, and \d+ KiB more would pass its quota of 1 MiB;/,
    );
    // A redeploy of unchanged files sends the same bytes: kept once, so still answered.
    const again = await upload(s, first);
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.equal(again.body.upload, a.body.upload);
    assert.equal((await s.server.ctx.db.all('SELECT id FROM uploads')).length, 2);
    assert.equal(readdirSync(s.server.ctx.config.uploadsDir).length, 4, 'two archives and their indexes');
  });

  test('a declared length past the quota is refused before the body is sent', async () => {
    const r = await rawPut(s, '/v1/uploads', {
      type: 'application/x-tar',
      length: 900 * KiB,
      pieces: [Buffer.alloc(KiB)],
    });
    assert.equal(r.status, 413, r.text.slice(0, 200));
    assert.match(json(r).error, /^upload quota/);
    await alive(s);
  });
});

describe('two uploads racing for the room of one', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_UPLOADS_QUOTA: '1' });
  });
  after(() => s.close());

  test('both fit alone, together they do not: one 201, one 413', async () => {
    const [x, y] = await Promise.all([randomTar(600 * KiB), randomTar(600 * KiB)]);
    const got = await Promise.all([upload(s, x), upload(s, y)]);
    assert.deepEqual(got.map((r) => r.status).sort(), [201, 413], JSON.stringify(got.map((r) => r.body)));
    assert.equal((await s.server.ctx.db.all('SELECT id FROM uploads')).length, 1);
    assert.equal(readdirSync(s.server.ctx.config.uploadsDir).length, 2);
  });
});

describe('a team keeps at most SVC_UPLOADS_QUOTA_COUNT uploads', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer('sqlite', { SVC_UPLOADS_QUOTA_COUNT: '2' });
  });
  after(() => s.close());

  test('the third distinct upload is refused, however small', async () => {
    for (let i = 0; i < 2; i++) assert.equal((await upload(s, await randomTar(KiB))).status, 201);
    assertError(await upload(s, await randomTar(KiB)), 413, 'would pass its quota of 2 uploads');
  });
});

describe('upload bodies are cut when they stall, not at the request timeout', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(
      'sqlite',
      {},
      { limits: { requestTimeoutMs: 1000, uploadIdleTimeoutMs: 1500, uploadTimeoutMs: 120_000 } },
    );
  });
  after(() => s.close());

  test('an honest slow upload, longer than the request timeout, is taken', async () => {
    const data = await randomTar(16 * KiB);
    const pieces = Array.from({ length: 16 }, (_, i) => data.subarray(i * 1152, (i + 1) * 1152));
    assert.equal(Buffer.concat(pieces).length, data.length);
    const r = await rawPut(s, '/v1/uploads', {
      type: 'application/x-tar',
      length: data.length,
      pieces,
      gapMs: 200,
    });
    assert.equal(r.status, 201, r.text.slice(0, 300));
  });

  test('an upload that stops sending is answered 408 and closed; the server still answers', async () => {
    const dir = s.server.ctx.config.uploadsDir;
    const kept = readdirSync(dir).sort();
    const r = await rawPut(s, '/v1/uploads', {
      type: 'application/x-tar',
      length: 64 * KiB,
      pieces: [Buffer.alloc(KiB)],
    });
    assert.equal(r.status, 408, r.text.slice(0, 300));
    assert.match(json(r).error, /the upload stalled: no bytes for 1\.5 s/);
    await alive(s);
    // The handler sees its body end with the connection, then removes what it had written.
    const now = () => readdirSync(dir).sort();
    for (let i = 0; i < 200 && now().length > kept.length; i++) await new Promise((r) => setTimeout(r, 25));
    assert.deepEqual(now(), kept, 'the partial upload is removed');
  });

  test('other routes still get the whole body within the request timeout', async () => {
    const pieces = Array.from({ length: 30 }, () => Buffer.from(' '));
    const r = await rawPut(s, '/v1/projects', { type: 'application/json', length: 2000, pieces, gapMs: 100 });
    assert.equal(r.status, 408, r.text.slice(0, 300));
    assert.match(json(r).error, /the request body did not arrive within 1 s/);
    await alive(s);
  });
});
