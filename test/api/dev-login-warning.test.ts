// SVC_DEV_LOGIN=1 signs anyone who reaches the server in as any existing user: the program says so
// at start when it listens beyond loopback, and stays quiet on 127.0.0.1.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { devLoginWarning, isLoopbackHost } from '../../server/config/config.ts';

/** Runs svc-server until it logs that it listens; returns everything it printed. */
async function startOutput(addr: string, dir: string, procs: ChildProcess[]): Promise<string> {
  const proc = spawn(
    process.execPath,
    [join(process.cwd(), 'programs/svc-server.ts'), '-addr', addr, '-db', join(dir, `${procs.length}.db`)],
    { env: { ...process.env, SVC_DEV_LOGIN: '1', SVC_BOOTSTRAP_KEY: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  procs.push(proc);
  let out = '';
  return new Promise((resolve, reject) => {
    const seen = (d: Buffer) => {
      out += d;
      if (out.includes('svc-server listening')) setImmediate(() => resolve(out));
    };
    proc.stdout?.on('data', seen);
    proc.stderr?.on('data', seen);
    proc.once('exit', (code) => reject(new Error(`svc-server exited ${code}:\n${out}`)));
  });
}

describe('SVC_DEV_LOGIN warning', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-devlogin-'));
  const procs: ChildProcess[] = [];
  after(() => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('loopback hosts are recognised; others warn', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost']) assert.ok(isLoopbackHost(h), h);
    for (const h of ['0.0.0.0', '::', '10.0.0.5', 'example.com']) assert.ok(!isLoopbackHost(h), h);
    assert.equal(devLoginWarning({ devLogin: false, host: '0.0.0.0' }), null);
    assert.match(devLoginWarning({ devLogin: true, host: '0.0.0.0' }) ?? '', /SVC_DEV_LOGIN=1 lets anyone/);
  });

  test('the program warns at start on 0.0.0.0 and not on 127.0.0.1', async () => {
    const open = await startOutput('0.0.0.0:0', dir, procs);
    assert.match(
      open,
      /WARNING: SVC_DEV_LOGIN=1 lets anyone who reaches 0\.0\.0\.0 sign in as any existing user/,
    );
    const local = await startOutput('127.0.0.1:0', dir, procs);
    assert.doesNotMatch(local, /SVC_DEV_LOGIN=1 lets anyone/);
  });
});
