// `files put`, `files get` and `exec` against a fake sidecar. `files get` is fed hostile archives
// (crafted with tar-stream and returned by the sidecar's env.get): it must never write outside the
// target directory, never create or follow links, and refuse absolute, `..`, device and fifo entries.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import tar from 'tar-stream';
import { SIMPLE_COMPOSE } from '../orchestrator/harness.ts';
import { assertExit, assertFails, type CliWorld, cliWorld, tempDir } from './harness.ts';

interface Entry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device' | 'block-device';
  content?: string;
  linkname?: string;
  mode?: number;
}

async function tarOf(entries: Entry[]): Promise<Buffer> {
  const p = tar.pack();
  for (const e of entries) {
    const type = e.type ?? 'file';
    const header = {
      name: e.name,
      type,
      mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644),
      linkname: e.linkname,
    };
    if (type === 'file') p.entry(header, e.content ?? '');
    else p.entry({ ...header, devmajor: 1, devminor: 3 });
  }
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function entriesOf(
  data: Buffer,
): Promise<{ name: string; type: string; uid: number; content: string }[]> {
  const ex = tar.extract();
  const out: { name: string; type: string; uid: number; content: string }[] = [];
  const done = (async () => {
    for await (const e of ex) {
      const chunks: Buffer[] = [];
      for await (const c of e) chunks.push(c as Buffer);
      out.push({
        name: e.header.name,
        type: e.header.type,
        uid: e.header.uid,
        content: Buffer.concat(chunks).toString(),
      });
    }
  })();
  ex.end(data);
  await done;
  return out;
}

describe('files and exec', () => {
  let w: CliWorld;
  let env: string;
  before(async () => {
    w = await cliWorld('sqlite');
    const p = await w.t.req('POST', '/v1/projects', { body: { name: 'files' } });
    env = p.body.environments[0].ID;
    const d = await w.t.req('POST', '/v1/projects/files/deploy', { body: { compose: SIMPLE_COMPOSE } });
    assert.equal(d.status, 202);
    for (;;) {
      const r = await w.t.req('GET', `/v1/deployments/${d.body.deployment.ID}`);
      if (r.body.deployment.FinishedAt) {
        assert.equal(r.body.deployment.Status, 'succeeded');
        break;
      }
      await new Promise((res) => setTimeout(res, 20));
    }
  });
  after(() => w.close());

  /** Makes the host answer env.get with `archive`, then runs `files get` into a fresh directory. */
  const get = async (archive: Buffer, target = join(tempDir(), 'dl')) => {
    w.sc.handlers['env.get'] = () => ({ tar_b64: archive.toString('base64') });
    try {
      const r = await w.run(['files', 'get', '--service', 'app', env, '/data', target]);
      return { r, target };
    } finally {
      delete w.sc.handlers['env.get'];
    }
  };
  const lastPut = () =>
    w.sc.commands('env.put').at(-1)?.payload as { service: string; path: string; tar_b64: string };

  test('files put tars a directory under its base name (links as links, special files skipped)', async () => {
    const dir = join(w.home, 'data');
    mkdirSync(join(dir, 'sub'), { recursive: true });
    writeFileSync(join(dir, 'a.txt'), 'alpha');
    writeFileSync(join(dir, 'sub', 'b.txt'), 'beta');
    symlinkSync('a.txt', join(dir, 'ln'));
    const fifo = spawnSync('mkfifo', [join(dir, 'pipe')]).status === 0;
    const r = await w.run(['files', 'put', '--service', 'app', env, 'data', '/srv/in']);
    assertExit(r, 0);
    const body = JSON.parse(r.stdout);
    assert.equal(body.ok, true);
    const put = lastPut();
    assert.equal(put.service, 'app');
    assert.equal(put.path, '/srv/in');
    const archive = Buffer.from(put.tar_b64, 'base64');
    assert.equal(body.bytes, archive.length);
    const entries = await entriesOf(archive);
    assert.deepEqual(
      entries.map((e) => [e.name.replace(/\/$/, ''), e.type, e.content]),
      [
        ['data', 'directory', ''],
        ['data/a.txt', 'file', 'alpha'],
        ['data/ln', 'symlink', ''],
        ['data/sub', 'directory', ''],
        ['data/sub/b.txt', 'file', 'beta'],
      ],
    );
    assert.ok(entries.every((e) => e.uid === 0));
    if (fifo) assert.match(r.stderr, /note: skipped data\/pipe: not a regular file/);
  });

  test('files put of one file; a missing path; over 32 MiB is refused before uploading', async () => {
    writeFileSync(join(w.home, 'notes.txt'), 'n');
    assertExit(await w.run(['files', 'put', '--service', 'app', env, join(w.home, 'notes.txt'), '/srv']), 0);
    assert.deepEqual(
      (await entriesOf(Buffer.from(lastPut().tar_b64, 'base64'))).map((e) => e.name),
      ['notes.txt'],
    );
    assertFails(
      await w.run(['files', 'put', '--service', 'app', env, 'nowhere', '/srv']),
      'cannot read nowhere: ENOENT',
    );
    const big = join(w.home, 'big.bin');
    writeFileSync(big, '');
    truncateSync(big, 33 * 1024 * 1024); // sparse: no disk used
    const puts = w.sc.commands('env.put').length;
    assertFails(await w.run(['files', 'put', '--service', 'app', env, big, '/srv']), 'larger than 32 MiB');
    assert.equal(w.sc.commands('env.put').length, puts, 'nothing was uploaded');
    assertFails(
      await w.run(['files', 'put', '--service', 'nope', env, join(w.home, 'notes.txt'), '/srv']),
      "no service 'nope'",
    );
  });

  test('files get extracts regular files and directories and counts the files', async () => {
    const archive = await tarOf([
      { name: 'data/', type: 'directory' },
      { name: 'data/a.txt', content: 'alpha' },
      { name: './data/sub/run.sh', content: '#!/bin/sh\n', mode: 0o4755 },
    ]);
    const { r, target } = await get(archive);
    assertExit(r, 0);
    assert.equal(r.stdout, `2 files written under ${target}\n`);
    assert.equal(readFileSync(join(target, 'data', 'a.txt'), 'utf8'), 'alpha');
    assert.equal(statSync(join(target, 'data', 'sub', 'run.sh')).mode & 0o7777, 0o755, 'setuid dropped');
    // Into an existing directory, over existing files.
    const again = await get(archive, target);
    assertExit(again.r, 0);
  });

  for (const [what, entries, phrase] of [
    [
      'an absolute path',
      [{ name: 'ok.txt' }, { name: '/tmp/svc-cli-evil.txt', content: 'x' }],
      'absolute path',
    ],
    ['a .. path', [{ name: 'ok.txt' }, { name: '../evil.txt', content: 'x' }], "'..' in the path"],
    ['a deeper .. path', [{ name: 'a/b/../../../evil.txt', content: 'x' }], "'..' in the path"],
    ['a fifo', [{ name: 'ok.txt' }, { name: 'p', type: 'fifo' }], 'fifo entries are never extracted'],
    ['a character device', [{ name: 'null', type: 'character-device' }], 'character-device entries'],
    ['a block device', [{ name: 'sda', type: 'block-device' }], 'block-device entries'],
  ] as [string, Entry[], string][]) {
    test(`files get refuses an archive with ${what} and writes nothing`, async () => {
      const { r, target } = await get(await tarOf(entries));
      assertFails(r, phrase);
      assert.match(r.stderr, /nothing was written/);
      assert.equal(existsSync(target), false);
      assert.equal(existsSync('/tmp/svc-cli-evil.txt'), false);
    });
  }

  test('files get skips symlinks and hardlinks, and says so', async () => {
    const archive = await tarOf([
      { name: 'a.txt', content: 'alpha' },
      { name: 'ln', type: 'symlink', linkname: '/etc/passwd' },
      { name: 'hl', type: 'link', linkname: 'a.txt' },
      { name: 'b.txt', content: 'beta' },
    ]);
    const { r, target } = await get(archive);
    assertExit(r, 0);
    assert.equal(r.stdout, `2 files written under ${target}\n`);
    assert.match(r.stderr, /note: skipped ln \(symlink to \/etc\/passwd\): links are never extracted/);
    assert.match(r.stderr, /note: skipped hl \(hardlink to a\.txt\): links are never extracted/);
    assert.deepEqual(readdirSync(target).sort(), ['a.txt', 'b.txt']);
  });

  test('files get never writes through a link: one from the archive, or one already on disk', async () => {
    const outside = tempDir();
    const viaArchive = await tarOf([
      { name: 'evil', type: 'symlink', linkname: outside },
      { name: 'evil/pwned', content: 'x' },
      { name: 'evil/deeper/pwned', content: 'x' },
    ]);
    const first = await get(viaArchive);
    assertExit(first.r, 0);
    assert.equal(first.r.stdout, `0 files written under ${first.target}\n`);
    assert.match(first.r.stderr, /skipped evil\/pwned: under the skipped link evil/);
    assert.deepEqual(readdirSync(outside), []);
    assert.deepEqual(readdirSync(first.target), []);

    const target = join(tempDir(), 'dl');
    mkdirSync(target);
    symlinkSync(outside, join(target, 'pre'));
    const second = await get(await tarOf([{ name: 'ok.txt' }, { name: 'pre/pwned', content: 'x' }]), target);
    assertFails(second.r, 'pre is a symlink on disk');
    assert.deepEqual(readdirSync(outside), []);
    assert.deepEqual(readdirSync(target), ['pre'], 'nothing was written, not even ok.txt');
    symlinkSync(join(outside, 'file'), join(target, 'last'));
    const third = await get(await tarOf([{ name: 'last', content: 'x' }]), target);
    assertFails(third.r, 'last is a symlink on disk');
    assert.equal(existsSync(join(outside, 'file')), false);
  });

  test('files get: a host error is one line with the status; a non-tar answer is refused', async () => {
    w.sc.handlers['env.get'] = () => {
      throw new Error('no such path /data');
    };
    try {
      assertFails(
        await w.run(['files', 'get', '--service', 'app', env, '/data', join(tempDir(), 'x')]),
        /no such path \/data.*\(HTTP 502\)/,
      );
    } finally {
      delete w.sc.handlers['env.get'];
    }
    const garbage = Buffer.alloc(1024, 7);
    const { r } = await get(garbage);
    assertFails(r, 'not a valid tar');
  });

  test('exec prints {exit_code, stdout, stderr}; a non-zero exit is not an error; -- is optional', async () => {
    w.sc.handlers['env.exec'] = (f) => {
      const p = f.payload as { cmd: string[] };
      return { exit_code: 3, stdout: p.cmd.join('|'), stderr: 'warn' };
    };
    try {
      const r = await w.run(['exec', '--service', 'app', env, '--', 'ls', '-la', '--color']);
      assertExit(r, 0);
      assert.equal(
        r.stdout,
        `${JSON.stringify({ exit_code: 3, stdout: 'ls|-la|--color', stderr: 'warn' }, null, 2)}\n`,
      );
      const bare = await w.run(['exec', '--service=app', env, 'sh', '-c', 'exit 3']);
      assertExit(bare, 0);
      assert.equal(JSON.parse(bare.stdout).stdout, 'sh|-c|exit 3');
      const payload = w.sc.commands('env.exec').at(-1)?.payload as { service: string };
      assert.equal(payload.service, 'app');
    } finally {
      delete w.sc.handlers['env.exec'];
    }
    w.sc.handlers['env.exec'] = () => {
      throw new Error('container is paused');
    };
    try {
      assertFails(
        await w.run(['exec', '--service', 'app', env, 'true']),
        /container is paused.*\(HTTP 502\)/,
      );
    } finally {
      delete w.sc.handlers['env.exec'];
    }
    assertFails(await w.run(['exec', '--service', 'nope', env, 'true']), "no service 'nope'");
  });
});
