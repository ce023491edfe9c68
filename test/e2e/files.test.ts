// The file API on a real control plane, a real svcd and real Docker: every route, text and binary
// round trips, owner and mode, atomic replacement seen from inside the container, the size cap
// (a 2 GiB write refused with memory flat), missing paths, links that point at /etc staying inside
// the container, devices, FIFOs and setuid refused, a watch seeing create/write/rename/remove, and
// a clear 501 naming the program an image lacks.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages, PGREDIS_IMAGE } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { type Body, containerOf, cutWrite, fsClient, readerLoop, sse } from './files-support.ts';
import { exec, finished, type Real, startReal } from './real.ts';

const MiB = 1024 * 1024;
const CAP = 100 * MiB;

const STACK = `
services:
  app:
    image: ${BUSYBOX_IMAGE}
    user: "1000:1000"
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    volumes: [data:/data]
  root:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; mkdir -p /data/w; chown 1000:1000 /data /data/w; ln -s /etc /data/linketc; ln -s /etc/hostname /data/hostlink; mknod /data/null c 1 3; mkfifo /data/fifo; while :; do sleep 1; done"]
    volumes: [data:/data]
  debian:
    image: ${PGREDIS_IMAGE}
    command: ["sleep", "infinity"]
  bare:
    image: ${BUSYBOX_IMAGE}
    command: ["sh", "-c", "trap 'exit 0' TERM; rm -f /bin/sh /bin/mv; while :; do sleep 1; done"]
volumes:
  data: {}
`;

describe('the file API on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let env: string;
  const { put, get, json, api, url, auth, fetchJson } = fsClient(
    () => r,
    () => env,
  );

  before(async () => {
    await ensureTestImages({ postgres: true });
    r = await startReal({ env: { SVC_FS_MAX_FILE_BYTES: String(CAP) } });
    const p = await r.t.req('POST', '/v1/projects', { body: { name: 'files' } });
    env = p.body.environments[0].ID;
    const d = await r.t.req('POST', '/v1/projects/files/deploy', { body: { compose: STACK } });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const { deployment } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log()}`);
    // The root service prepares links, a device node and a FIFO in the shared volume.
    for (;;) {
      const out = await exec(r.t, env, 'root', ['ls', '/data']);
      if (out.stdout.includes('fifo')) break;
    }
  });
  after(async () => r?.close());

  test('text and binary files round trip, owned by the service user with the given mode', async () => {
    const created = await json(await put('app', '/data/new/dir/a.txt', 'hello, files\n', { mode: '640' }));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(created.body, { path: '/data/new/dir/a.txt', size: 13 });
    const text = await get('app', '/data/new/dir/a.txt');
    assert.equal(text.status, 200);
    assert.equal(text.headers.get('content-type'), 'application/octet-stream');
    assert.equal(await text.text(), 'hello, files\n');
    const owner = await exec(r.t, env, 'app', ['stat', '-c', '%u:%g %a', '/data/new/dir/a.txt', '/data/new']);
    assert.equal(owner.stdout, '1000:1000 640\n1000:1000 755\n');
    const stat = await json(await api('GET', '/stat', { service: 'app', path: '/data/new/dir/a.txt' }));
    assert.equal(stat.status, 200);
    assert.equal(stat.body.type, 'file');
    assert.equal(stat.body.size, 13);
    assert.equal(stat.body.mode, 0o640);
    assert.equal(stat.body.name, 'a.txt');
    assert.ok(Date.parse(stat.body.mtime) > Date.now() - 3600_000);

    const bin = randomBytes(3 * MiB + 17);
    assert.equal((await put('app', '/data/bin', bin)).status, 201);
    const back = Buffer.from(await (await get('app', '/data/bin')).arrayBuffer());
    assert.ok(back.equals(bin), 'binary bytes came back the same');
    const empty = await put('app', '/data/empty', new Uint8Array(0));
    assert.equal(empty.status, 201);
    assert.equal(await (await get('app', '/data/empty')).text(), '');
  });

  test('list with depth, mkdir -p, move and recursive remove', async () => {
    const made = await json(await fetchJson('POST', '/mkdir', { service: 'app', path: '/data/m/n/o' }));
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.deepEqual(made.body, { path: '/data/m/n/o', created: true });
    assert.equal(
      (await json(await fetchJson('POST', '/mkdir', { service: 'app', path: '/data/m' }))).body.created,
      false,
    );
    assert.equal((await put('app', '/data/m/n/f.txt', 'f')).status, 201);
    const one = await json(await api('GET', '/list', { service: 'app', path: '/data/m' }));
    assert.equal(one.status, 200);
    assert.deepEqual(
      one.body.entries.map((e: { path: string }) => e.path),
      ['/data/m/n'],
    );
    assert.equal(one.body.truncated, false);
    const deep = await json(await api('GET', '/list', { service: 'app', path: '/data/m', depth: '3' }));
    assert.equal(deep.status, 200, JSON.stringify(deep.body));
    const byPath = Object.fromEntries(deep.body.entries.map((e: { path: string }) => [e.path, e]));
    assert.deepEqual(Object.keys(byPath).sort(), ['/data/m/n', '/data/m/n/f.txt', '/data/m/n/o']);
    assert.equal(byPath['/data/m/n'].type, 'dir');
    assert.equal(byPath['/data/m/n/f.txt'].type, 'file');
    assert.equal(byPath['/data/m/n/f.txt'].size, 1);
    const links = await json(await api('GET', '/list', { service: 'root', path: '/data' }));
    const link = links.body.entries.find((e: { name: string }) => e.name === 'linketc');
    assert.equal(link.type, 'symlink');
    assert.equal(links.body.entries.find((e: { name: string }) => e.name === 'fifo').type, 'other');

    const moved = await fetchJson('POST', '/move', {
      service: 'app',
      from: '/data/m/n/f.txt',
      to: '/data/m/g.txt',
    });
    assert.equal(moved.status, 204);
    assert.equal((await get('app', '/data/m/n/f.txt')).status, 404);
    assert.equal(await (await get('app', '/data/m/g.txt')).text(), 'f');
    assert.equal((await api('DELETE', '', { service: 'app', path: '/data/m' })).status, 204);
    assert.equal((await api('GET', '/stat', { service: 'app', path: '/data/m' })).status, 404);
    const notDir = await json(await api('GET', '/list', { service: 'app', path: '/data/bin' }));
    assert.equal(notDir.status, 409);
    assert.match(notDir.body.error, /not a directory/);
  });

  test('a missing path is 404 on every route; other refusals are clear', async () => {
    const q = { service: 'app', path: '/data/nope' };
    for (const [method, route] of [
      ['GET', ''],
      ['DELETE', ''],
      ['GET', '/stat'],
      ['GET', '/list'],
      ['GET', '/watch'],
    ] as const) {
      const res = await json(await api(method, route, q));
      assert.equal(res.status, 404, `${method} ${route}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.error, /\/data\/nope does not exist in service 'app'/);
    }
    const move = await fetchJson('POST', '/move', { service: 'app', from: '/data/nope', to: '/data/x' });
    assert.equal(move.status, 404);
    assert.equal((await json(await api('GET', '', { service: 'app', path: 'relative' }))).status, 400);
    assert.equal((await json(await api('GET', '', { service: 'nosuch', path: '/x' }))).status, 400);
    const dir = await json(await get('app', '/data'));
    assert.equal(dir.status, 409);
    assert.match(dir.body.error, /is a directory/);
  });

  test('a write is atomic: a reader inside the container sees the old file or the new one', async () => {
    const old = Buffer.alloc(24 * MiB, 'a');
    const next = Buffer.alloc(24 * MiB, 'b');
    assert.equal((await put('app', '/data/big', old)).status, 201);
    const sums = new Set([old, next].map((b) => createHash('md5').update(b).digest('hex')));
    const reader = readerLoop(containerOf(env, 'app'), '/data/big');
    assert.equal((await put('app', '/data/big', next)).status, 201);
    const seen = await reader.stop();
    assert.ok(seen.sums.length > 0, 'the reader read the file');
    for (const s of seen.sums) assert.ok(sums.has(s), `a reader saw a partial file (${s})`);
    assert.equal(seen.errors, '', 'the file was never missing');
    const left = await exec(r.t, env, 'app', ['ls', '-a', '/data']);
    assert.doesNotMatch(left.stdout, /\.svc-/, 'no temporary file is left');
  });

  test('the size cap: a 2 GiB write and a read over it are 413, memory stays flat', async () => {
    const rss = process.memoryUsage().rss;
    const chunk = Buffer.alloc(MiB);
    async function* twoGiB() {
      for (let i = 0; i < 2048; i++) yield chunk;
    }
    const res = await fetch(url('', { service: 'app', path: '/data/huge' }), {
      method: 'PUT',
      headers: {
        ...auth(),
        'content-type': 'application/octet-stream',
        'content-length': String(2048 * MiB),
      },
      body: twoGiB() as unknown as Body,
      duplex: 'half',
    } as RequestInit);
    // Answered before the body is read (the rest is drained, then the connection cut).
    assert.equal(res.status, 413);
    assert.match(
      ((await res.json()) as { error: string }).error,
      /over the 104857600-byte limit \(SVC_FS_MAX_FILE_BYTES\)/,
    );
    assert.equal((await get('app', '/data/huge')).status, 404, 'nothing was written');
    // A streamed 96 MiB write and read hold no file in memory.
    const big = Buffer.alloc(MiB, 'z');
    async function* ninetySix() {
      for (let i = 0; i < 96; i++) yield big;
    }
    const w = await fetch(url('', { service: 'app', path: '/data/ninety-six' }), {
      method: 'PUT',
      headers: { ...auth(), 'content-type': 'application/octet-stream', 'content-length': String(96 * MiB) },
      body: ninetySix() as unknown as Body,
      duplex: 'half',
    } as RequestInit);
    assert.equal(w.status, 201, await w.text());
    let bytes = 0;
    for await (const c of (await get('app', '/data/ninety-six')).body as unknown as AsyncIterable<Uint8Array>)
      bytes += c.length;
    assert.equal(bytes, 96 * MiB);
    assert.ok(
      process.memoryUsage().rss - rss < 64 * MiB,
      `rss grew ${(process.memoryUsage().rss - rss) / MiB} MiB`,
    );
    await exec(r.t, env, 'app', ['dd', 'if=/dev/zero', 'of=/data/over', 'bs=1M', 'count=101']);
    const over = await json(await get('app', '/data/over'));
    assert.equal(over.status, 413);
    assert.match(over.body.error, /over the 104857600-byte file limit/);
    const chunked = await json(await put('app', '/data/chunked', new Blob(['x']).stream()));
    assert.equal(chunked.status, 411);
    assert.equal((await fetch(`${r.t.url}/health`)).status, 200, 'the control plane still answers');
  });

  test('links to /etc resolve inside the container; devices, FIFOs and setuid are refused', async () => {
    const hostHostname = readFileSync('/etc/hostname', 'utf8');
    const viaLink = await (await get('root', '/data/hostlink')).text();
    const inside = (await exec(r.t, env, 'root', ['cat', '/etc/hostname'])).stdout;
    assert.equal(viaLink, inside);
    assert.notEqual(viaLink, hostHostname);
    const probe = `svc-probe-${randomBytes(4).toString('hex')}`;
    assert.equal((await put('root', `/data/linketc/${probe}`, 'inside')).status, 201);
    assert.equal(existsSync(`/etc/${probe}`), false, "the host's /etc was not written");
    assert.equal((await exec(r.t, env, 'root', ['cat', `/etc/${probe}`])).stdout, 'inside');
    for (const [path, what] of [
      ['/data/null', /a device node/],
      ['/data/fifo', /a FIFO/],
    ] as const) {
      const res = await json(await get('root', path));
      assert.equal(res.status, 409, `${path}: ${JSON.stringify(res.body)}`);
      assert.match(res.body.error, what);
    }
    // The service's user (1000) cannot write /etc: refused before a byte lands there.
    const denied = await json(await put('app', '/etc/svc-denied', 'x'));
    assert.equal(denied.status, 403, JSON.stringify(denied.body));
    assert.match(denied.body.error, /its user cannot write the directory \/etc/);
    assert.doesNotMatch((await exec(r.t, env, 'app', ['ls', '-a', '/etc'])).stdout, /svc-denied/);
    const setuid = await json(await put('app', '/data/suid', 'x', { mode: '4755' }));
    assert.equal(setuid.status, 403);
    assert.match(setuid.body.error, /setuid, setgid and sticky bits are not accepted/);
    assert.equal((await get('app', '/data/suid')).status, 404);
  });

  test('watch: create, write, rename and remove events', async () => {
    const res = await fetch(url('/watch', { service: 'app', path: '/data/w' }), { headers: auth() });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const events = sse(res);
    assert.equal((await put('app', '/data/w/one.txt', '1')).status, 201);
    assert.deepEqual(await events.next(), { type: 'create', path: '/data/w/one.txt' });
    assert.equal((await put('app', '/data/w/one.txt', '22')).status, 201);
    assert.deepEqual(await events.next(), { type: 'write', path: '/data/w/one.txt' });
    assert.equal(
      (await fetchJson('POST', '/move', { service: 'app', from: '/data/w/one.txt', to: '/data/w/two.txt' }))
        .status,
      204,
    );
    assert.deepEqual(await events.next(), {
      type: 'rename',
      from: '/data/w/one.txt',
      path: '/data/w/two.txt',
    });
    assert.equal((await api('DELETE', '', { service: 'app', path: '/data/w/two.txt' })).status, 204);
    assert.deepEqual(await events.next(), { type: 'remove', path: '/data/w/two.txt' });
    await events.close();
    assert.equal((await fetch(`${r.t.url}/health`)).status, 200);
  });

  test('an image without sh or mv: 501 naming what is missing', async () => {
    const list = await json(await api('GET', '/list', { service: 'bare', path: '/' }));
    assert.equal(list.status, 501, JSON.stringify(list.body));
    assert.match(list.body.error, /listing needs \/bin\/sh and find/);
    const w = await json(await put('bare', '/tmp/x', 'x'));
    assert.equal(w.status, 501, JSON.stringify(w.body));
    assert.match(w.body.error, /writing needs test and mv/);
    assert.equal((await exec(r.t, env, 'bare', ['ls', '-a', '/tmp'])).stdout.includes('.svc-'), false);
  });

  test('GNU find (a Debian image) and busybox list alike, a newline in a name included', async () => {
    for (const [service, dir] of [
      ['debian', '/tmp/g'],
      ['app', '/data/g'],
    ]) {
      assert.equal((await put(service, `${dir}/odd\nname`, 'odd')).status, 201);
      assert.equal((await fetchJson('POST', '/mkdir', { service, path: `${dir}/sub` })).status, 201);
      const l = await json(await api('GET', '/list', { service, path: dir }));
      assert.equal(l.status, 200, JSON.stringify(l.body));
      const view = l.body.entries
        .map((e: { name: string; type: string; size: number; mode: number }) => [
          e.name,
          e.type,
          e.size,
          e.mode,
        ])
        .sort();
      assert.deepEqual(view[0], ['odd\nname', 'file', 3, 0o644], service);
      assert.deepEqual(view[1].slice(0, 2), ['sub', 'dir'], service);
      assert.equal(await (await get(service, `${dir}/odd\nname`)).text(), 'odd');
    }
  });

  test('a client leaving mid-read, mid-write or mid-watch ends only its own transfer', async () => {
    const data = Buffer.alloc(32 * MiB, 'q');
    assert.equal((await put('app', '/data/leave', data)).status, 201);
    const reading = new AbortController();
    const res = await get('app', '/data/leave', reading.signal);
    await (res.body as ReadableStream<Uint8Array>).getReader().read();
    reading.abort();
    await cutWrite(url('', { service: 'app', path: '/data/left' }), auth(), 32 * MiB, 4 * MiB);
    // Watches end on the host once their client left: more than the 8 per environment open in turn.
    for (let i = 0; i < 12; i++) {
      const leaving = new AbortController();
      let w: Response;
      do
        w = await fetch(url('/watch', { service: 'app', path: '/data' }), {
          headers: auth(),
          signal: leaving.signal,
        });
      while (w.status === 503);
      if (w.status !== 200) assert.fail(`watch ${i}: ${w.status} ${await w.text()}`);
      leaving.abort();
    }
    assert.equal((await fetch(`${r.t.url}/health`)).status, 200, 'the control plane still answers');
    assert.equal(r.sidecar.exitCode, null, 'svcd still runs');
    const again = Buffer.from(await (await get('app', '/data/leave')).arrayBuffer());
    assert.ok(again.equals(data), 'the file reads whole after a reader left');
    assert.equal((await get('app', '/data/left')).status, 404, 'a cut write never touches its target');
    // The cut write's temporary file is removed once the host sees the body end early.
    while ((await exec(r.t, env, 'app', ['ls', '-a', '/data'])).stdout.includes('.left.svc-'));
  });
});
