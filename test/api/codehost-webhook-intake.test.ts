// The webhook refuses what its headers already condemn before it reads a byte of the body (content
// type, signature header presence and format, delivery and event headers, declared length), reads
// at most a few bodies at once per client address, gives a body GitHub's 10 s (here shortened) to
// arrive, and limits deliveries per address per minute. Each refusal is answered while the client
// is still holding most of its body back, and the process answers after every bound has passed.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { FakeGitHub } from '../support/fakes/github.ts';
import { forEachDialect, startTestServer, type TestServer } from '../support/server.ts';
import { sendWebhook } from '../support/webhooks.ts';

const SIGNATURE = `sha256=${'0'.repeat(64)}`;
/** What a sender declares; it sends only the first bytes and holds the rest back. */
const DECLARED = 1024 * 1024;

interface Answer {
  status: number;
  body: any;
  sock: Socket;
}

/** Sends the headers and `sent` bytes of a body declared DECLARED long; resolves on the answer. */
function partial(s: TestServer, headers: Record<string, string>, sent = 16, held?: Socket[]) {
  return new Promise<Answer>((resolve, reject) => {
    const url = new URL(s.url);
    const sock = connect(Number(url.port), url.hostname, () => {
      const lines = Object.entries({
        'content-type': 'application/json',
        'x-hub-signature-256': SIGNATURE,
        'x-github-event': 'ping',
        'x-github-delivery': `partial-${Math.random()}`,
        'content-length': String(DECLARED),
        ...headers,
      })
        .filter(([, v]) => v !== '')
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      sock.write(`POST /webhooks/codehost HTTP/1.1\r\nHost: ${url.host}\r\n${lines}\r\n`);
      sock.write(Buffer.alloc(sent, 0x20));
    });
    held?.push(sock);
    let got = Buffer.alloc(0);
    sock.on('data', (c: Buffer) => {
      got = Buffer.concat([got, c]);
      const text = got.toString('utf8');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (got.length < Buffer.byteLength(text.slice(0, end + 4)) + length) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: JSON.parse(text.slice(end + 4, end + 4 + length) || 'null'), sock });
    });
    sock.on('error', reject);
  });
}

forEachDialect('webhook intake: refusals before the body, bounded reads, rates', (dialect) => {
  let s: TestServer;
  let gh: FakeGitHub;
  const open: Socket[] = [];
  const alive = async () => assert.equal((await s.req('GET', '/health', { token: false })).status, 200);

  before(async () => {
    gh = await new FakeGitHub().start();
    // Without the early refusals the server would wait for each body until this cut it (408).
    s = await startTestServer(dialect, gh.env(), { limits: { requestTimeoutMs: 5000 } });
  });
  after(async () => {
    for (const sock of open) sock.destroy();
    await s?.close();
    await gh?.close();
  });

  test('refused from the headers while the body is still held back', async () => {
    const cases: [Record<string, string>, number, string][] = [
      [{ 'content-type': 'application/x-www-form-urlencoded' }, 415, 'application/json'],
      [{ 'x-hub-signature-256': '' }, 401, 'without X-Hub-Signature-256'],
      [{ 'x-hub-signature-256': 'sha256=abc' }, 401, 'malformed X-Hub-Signature-256'],
      [{ 'x-hub-signature-256': `sha1=${'0'.repeat(40)}` }, 401, 'malformed'],
      [{ 'x-hub-signature-256': `sha256=${'0'.repeat(63)}G` }, 401, 'malformed'],
      [{ 'x-hub-signature-256': `sha256=${'A'.repeat(64)}` }, 401, 'malformed'],
      [{ 'x-github-delivery': '' }, 400, 'X-GitHub-Delivery'],
      [{ 'x-github-event': '' }, 400, 'X-GitHub-Event'],
      [{ 'content-length': String(3 * 1024 * 1024) }, 413, 'webhook body over'],
    ];
    for (const [headers, status, phrase] of cases) {
      const r = await partial(s, headers);
      open.push(r.sock);
      assert.equal(r.status, status, `${JSON.stringify(headers)}: ${JSON.stringify(r.body)}`);
      assert.ok(r.body.error.includes(phrase), `'${phrase}' not in '${r.body.error}'`);
      r.sock.destroy();
    }
    await alive();
  });

  test('a few bodies at once per address: the next is 429 at once; the slots come back', async () => {
    const intake = s.server.ctx.webhookIntake;
    assert.ok(intake);
    const held: Socket[] = [];
    for (let i = 0; i < intake.perAddress; i++) void partial(s, {}, 16, held).catch(() => {});
    // Once their headers are in, every slot of this address is taken: the next sender is refused.
    for (let i = 0; i < 500 && intake.inUse < intake.perAddress; i++)
      await new Promise((res) => setTimeout(res, 10));
    assert.equal(intake.inUse, intake.perAddress);
    const busy = await partial(s, {});
    busy.sock.destroy();
    assert.equal(busy.status, 429, JSON.stringify(busy.body));
    assert.match(busy.body.error, /webhook bodies at once from this address/);
    // The senders go away with their bodies unsent: their slots come back.
    for (const sock of held) sock.destroy();
    let ok = 0;
    for (let i = 0; i < 500 && ok !== 200; i++) {
      ok = (await sendWebhook(s, 'ping', { zen: 'z' })).status;
      if (ok !== 200) await new Promise((res) => setTimeout(res, 10));
    }
    assert.equal(ok, 200);
    assert.equal(intake.inUse, 0);
  });

  test('a body that does not arrive in time is 408 and dropped; the process answers after the bound', async () => {
    const intake = s.server.ctx.webhookIntake;
    assert.ok(intake);
    intake.readMs = 200;
    try {
      const r = await partial(s, {}, 1000);
      open.push(r.sock);
      assert.equal(r.status, 408, JSON.stringify(r.body));
      assert.match(r.body.error, /webhook body not received within 0.2 s/);
      r.sock.destroy();
    } finally {
      intake.readMs = 10_000;
    }
    await alive();
  });

  test('a signed body is read and verified in one pass; a mismatch is 401 and nothing is parsed', async () => {
    const body = Buffer.from('{"zen":"Anything added dilutes everything else.","hook_id":109948940}');
    assert.equal((await sendWebhook(s, 'ping', null, { raw: body })).status, 200);
    const bad = await sendWebhook(s, 'ping', null, { raw: Buffer.from('{not json'), secret: 'other' });
    assert.equal(bad.status, 401, 'refused on the signature, not the JSON');
  });
});

forEachDialect('webhook deliveries per address per minute', (dialect) => {
  test('past the budget: 429 with Retry-After; the process answers', async () => {
    const gh = await new FakeGitHub().start();
    const s = await startTestServer(dialect, gh.env(), { limits: { webhooksPerMinute: 3 } });
    try {
      for (let i = 0; i < 3; i++) assert.equal((await sendWebhook(s, 'ping', { zen: 'z' })).status, 200);
      const over = await sendWebhook(s, 'ping', { zen: 'z' });
      assert.equal(over.status, 429, JSON.stringify(over.body));
      assert.match(over.body.error, /webhook deliveries from this address/);
      assert.ok(Number(over.headers.get('retry-after')) > 0);
      assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
    } finally {
      await s.close();
      await gh.close();
    }
  });
});
