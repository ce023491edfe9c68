// `svc-server --dev`, the README's main job: the control plane on the embedded database joins
// this machine as a host through a local sidecar; a restart reuses that host.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fsTier } from '../../sidecar/storage/fixtures.ts';
import { closeXfsLoop } from '../../sidecar/storage/xfs-loop.ts';
import { tier } from '../support/tiers.ts';

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });

describe('svc-server --dev', { skip: tier('docker') }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-dev-'));
  let proc: ChildProcess | null = null;
  let out = '';
  after(async () => {
    // Killed outright: the local sidecar must notice and end too (it watches its parent).
    const p = proc;
    if (p && p.exitCode === null) {
      const gone = new Promise((r) => p.once('close', r));
      p.kill('SIGKILL');
      await gone;
    }
    // The local sidecar keeps its datasets on its own XFS image, mounted until taken down.
    await closeXfsLoop(join(dir, '.svc', 'data'));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (port: number) => {
    proc = spawn(
      process.execPath,
      [
        join(process.cwd(), 'programs/svc-server.ts'),
        '--dev',
        '-addr',
        `127.0.0.1:${port}`,
        '-db',
        join(dir, 'svc.db'),
      ],
      {
        cwd: dir,
        env: { ...process.env, SVC_BOOTSTRAP_KEY: '', SVC_DEV_DIR: join(dir, '.svc') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    proc.stderr?.on('data', (d) => (out += d));
    proc.stdout?.on('data', (d) => (out += d));
  };
  const hosts = async (port: number, key: string) => {
    const r = await fetch(`http://127.0.0.1:${port}/v1/hosts`, {
      headers: { authorization: `Bearer ${key}` },
    }).catch(() => null);
    return r?.ok ? ((await r.json()) as { hosts: any[] }).hosts : [];
  };
  const until = async (cond: () => Promise<boolean>, what: string) => {
    const t0 = Date.now();
    while (!(await cond())) {
      assert.ok(Date.now() - t0 < 60_000, `timed out: ${what}\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  test('joins this machine as a connected host; a restart reuses it; SIGTERM stops both', async () => {
    const port = await freePort();
    await start(port);
    await until(async () => /dak_\S+/.test(out), 'bootstrap key');
    const key = /bootstrap API key .*: (dak_\S+)/.exec(out)![1];
    assert.equal(readFileSync(join(dir, '.svc', 'dev-api-key'), 'utf8').trim(), key);
    await until(async () => (await hosts(port, key)).some((h) => h.connected), 'local host connected');
    const first = (await hosts(port, key))[0].ID;
    // --dev gives the local sidecar copy-on-write even on ext4: its own XFS image (issue 15).
    const cow = (await hosts(port, key))[0].Capabilities.cow;
    // (On a temp dir that clones by itself it reports that instead.)
    if (fsTier('xfs') === false) assert.ok(['xfs-loop', 'reflink', 'btrfs'].includes(cow), `cow: ${cow}`);
    else assert.equal(cow, 'none');
    const p = proc!;
    const exited = new Promise<number | null>((r) => p.once('exit', (c) => r(c)));
    p.kill('SIGTERM');
    assert.equal(await exited, 0);
    out = '';
    await start(port);
    await until(
      async () => (await hosts(port, key)).some((h) => h.connected),
      'host reconnected after restart',
    );
    const after = await hosts(port, key);
    assert.deepEqual(
      after.map((h) => h.ID),
      [first],
      'the same host, not a second one',
    );
    assert.doesNotMatch(out, /bootstrap API key/, 'the key is printed only on an empty database');
  });
});
