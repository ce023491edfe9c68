// The real `svc-server` program as a child process: bootstrap of the first team and key, and a
// graceful SIGTERM that lets an in-flight request finish and closes the database cleanly.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { openDb } from '../../server/db/open.ts';
import { startChild, stop } from '../support/program.ts';
import { dbTarget, forEachDialect } from '../support/server.ts';

const me = async (url: string, key: string) =>
  fetch(`${url}/v1/me`, { headers: { authorization: `Bearer ${key}` } }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { team: { Name: string } },
  }));

forEachDialect('svc-server program', (dialect) => {
  let target: string;
  let cleanup = () => {};
  before(async () => {
    ({ target, cleanup } = await dbTarget(dialect));
  });
  after(() => cleanup());

  test('an empty database gets one team and a generated key, printed once to stderr only', async () => {
    const first = await startChild(target, { SVC_TEAM: 'research' });
    const lines = first
      .stderr()
      .split('\n')
      .filter((l) => l.includes('bootstrap API key'));
    assert.equal(lines.length, 1, first.stderr());
    const m = /^bootstrap API key for team research \(shown once\): (dak_[A-Za-z0-9_-]+)$/.exec(lines[0]);
    assert.ok(m, lines[0]);
    const key = m[1];
    assert.ok(!first.stdout().includes(key), 'the key must not reach the log');
    const who = await me(first.url, key);
    assert.equal(who.status, 200);
    assert.equal(who.body.team.Name, 'research');
    assert.equal(await stop(first), 0);

    // A restart on the same database: nothing printed, no second team, the key still works.
    const second = await startChild(target, {
      SVC_TEAM: 'another',
      SVC_BOOTSTRAP_KEY: `dak_${'z'.repeat(32)}`,
    });
    assert.ok(!second.stderr().includes('bootstrap API key'), second.stderr());
    assert.equal((await me(second.url, key)).status, 200);
    assert.equal(
      (await me(second.url, `dak_${'z'.repeat(32)}`)).status,
      401,
      'the bootstrap key is consulted only on an empty database',
    );
    assert.equal(await stop(second), 0);
    const { db } = await openDb(target);
    try {
      const teams = await db.all<{ name: string }>('SELECT name FROM teams');
      assert.deepEqual(
        teams.map((t) => t.name),
        ['research'],
      );
    } finally {
      await db.close();
    }
  });

  test('SVC_BOOTSTRAP_KEY is installed for the first team and never printed', async () => {
    const { target: fresh, cleanup: done } = await dbTarget(dialect);
    const key = `dak_${randomBytes(24).toString('base64url')}`;
    try {
      const child = await startChild(fresh, { SVC_BOOTSTRAP_KEY: key });
      assert.ok(!child.stderr().includes('bootstrap API key'));
      assert.ok(!child.stderr().includes(key) && !child.stdout().includes(key));
      const who = await me(child.url, key);
      assert.equal(who.status, 200);
      assert.equal(who.body.team.Name, 'default');
      assert.equal(await stop(child), 0);
    } finally {
      done();
    }
  });

  test('SIGTERM: an in-flight request completes, new ones are refused, the database closes cleanly', async () => {
    const releases = mkdtempSync(join(tmpdir(), 'svc-rel-'));
    const size = 48 * 1024 * 1024;
    const blob = randomBytes(size);
    writeFileSync(join(releases, 'svcd-linux-amd64'), blob);
    const child = await startChild(target, { SVC_RELEASES_DIR: releases });
    try {
      const download = await new Promise<{ res: IncomingMessage; received: number; whole: Promise<Buffer> }>(
        (resolve, reject) => {
          get(`${child.url}/svcd`, (res) => {
            const chunks: Buffer[] = [];
            const whole = new Promise<Buffer>((done, fail) => {
              res.on('end', () => done(Buffer.concat(chunks)));
              res.on('error', fail);
              res.on('aborted', () => fail(new Error('response aborted')));
            });
            res.once('data', (c: Buffer) => {
              chunks.push(c);
              res.pause();
              resolve({ res, received: c.length, whole });
              res.on('data', (more: Buffer) => chunks.push(more));
            });
          }).on('error', reject);
        },
      );
      assert.ok(download.received < size, 'the download is still in flight');
      child.proc.kill('SIGTERM');
      // New requests are turned away once shutdown has begun.
      for (;;) {
        const r = await fetch(`${child.url}/health`).then(
          (x) => x.status,
          () => 0,
        );
        if (r !== 200) break;
        await new Promise((res) => setTimeout(res, 20));
      }
      // Then the in-flight download is read to its end.
      download.res.resume();
      const body = await download.whole;
      assert.equal(body.length, size);
      assert.equal(
        createHash('sha256').update(body).digest('hex'),
        createHash('sha256').update(blob).digest('hex'),
      );
      assert.equal(await child.exited, 0);
      assert.match(child.stdout(), /shutting down/);
      if (dialect === 'sqlite') {
        // A clean close checkpoints the WAL into the database file and removes it.
        const wal = `${target}-wal`;
        assert.ok(
          !existsSync(wal) || statSync(wal).size === 0,
          'WAL left behind: the database was not closed',
        );
      }
      const { db } = await openDb(target);
      try {
        const ok =
          dialect === 'sqlite'
            ? await db.get<{ integrity_check: string }>('PRAGMA integrity_check')
            : { integrity_check: 'ok' };
        assert.equal(ok?.integrity_check, 'ok');
        assert.ok((await db.all('SELECT id FROM teams')).length >= 1);
      } finally {
        await db.close();
      }
    } finally {
      if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
      rmSync(releases, { recursive: true, force: true });
    }
  });
});
