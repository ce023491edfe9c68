// The collect copy against a writer that is NOT frozen (the worst case the freeze guards against):
// a child process keeps swapping a collected directory with a symlink to a "host" directory while
// the copy runs, 300 times. Pinning every component means no byte of the host directory is ever
// copied: each round copies the real files, or refuses the symlink, or finds the path missing.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { copyDeclared } from './copy.ts';
import { Refusal } from './limits.ts';
import { pinRoot, unpin } from './pinned.ts';

const MARKER = 'HOST-SECRET-7f3c1a';

function allText(dir: string): string {
  let out = '';
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    out += name;
    out += statSync(p).isDirectory() ? allText(p) : readFileSync(p, 'utf8');
  }
  return out;
}

// Swaps <root>/work/sub with a symlink to the secret directory, as fast as it can.
const SWAPPER = `
const fs = require('node:fs');
const [work, secret] = process.argv.slice(1);
process.chdir(work);
let n = 0;
for (;;) {
  try {
    fs.renameSync('sub', 'sub.real');
    fs.symlinkSync(secret, 'sub');
    fs.renameSync('sub', 'sub.link');
    fs.renameSync('sub.real', 'sub');
    fs.unlinkSync('sub.link');
    if (++n % 1000 === 0) process.stdout.write('.');
  } catch {}
}`;

describe('collect copy against an unfrozen swapper', () => {
  let dir: string;
  let swapper: ChildProcess;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-copy-race-'));
    mkdirSync(join(dir, 'secret'));
    for (let i = 0; i < 4; i++) writeFileSync(join(dir, 'secret', `key${i}`), `${MARKER}\n`);
    mkdirSync(join(dir, 'root', 'work', 'sub'), { recursive: true });
    for (let i = 0; i < 4; i++) writeFileSync(join(dir, 'root', 'work', 'sub', `answer${i}`), 'mine\n');
    swapper = spawn(process.execPath, ['-e', SWAPPER, join(dir, 'root', 'work'), join(dir, 'secret')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  });
  after(() => {
    swapper.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('300 copies while the collected directory is swapped: no host byte is copied', async () => {
    let progress = '';
    swapper.stdout?.on('data', (d) => (progress += d));
    while (!progress.includes('.')) await new Promise((r) => setTimeout(r, 20)); // swapping has begun
    const outcomes = { copied: 0, refused: 0, missing: 0 };
    for (let round = 0; round < 300; round++) {
      const dest = join(dir, `dest${round}`);
      mkdirSync(dest);
      const root = await pinRoot(join(dir, 'root'));
      try {
        const r = await copyDeclared(root, ['/work'], dest);
        if (r.missing.length) outcomes.missing++;
        else outcomes.copied++;
      } catch (err) {
        if (!(err instanceof Refusal)) throw err;
        assert.equal(err.reason, 'symlink', err.message);
        outcomes.refused++;
      } finally {
        await unpin(root);
      }
      assert.ok(!allText(dest).includes(MARKER), `round ${round}: a host file reached the copy`);
      rmSync(dest, { recursive: true, force: true });
    }
    assert.ok(outcomes.refused > 0, `the swapper never raced the copy: ${JSON.stringify(outcomes)}`);
    assert.ok(outcomes.copied > 0, `no round copied the real files: ${JSON.stringify(outcomes)}`);
  });

  test('a symlink as a declared path or one of its ancestors is refused, never followed', async () => {
    const root = join(dir, 'r2');
    mkdirSync(join(root, 'a'), { recursive: true });
    const { symlinkSync } = await import('node:fs');
    symlinkSync(join(dir, 'secret'), join(root, 'a', 'link'));
    symlinkSync(join(dir, 'secret'), join(root, 'top'));
    for (const path of ['/a/link', '/top/key0', '/a/link/key0']) {
      const pinned = await pinRoot(root);
      const dest = mkdtempSync(join(dir, 'd-'));
      try {
        await assert.rejects(
          copyDeclared(pinned, [path], dest),
          (e: unknown) => e instanceof Refusal && e.reason === 'symlink',
        );
      } finally {
        await unpin(pinned);
      }
      assert.ok(!allText(dest).includes(MARKER));
    }
  });
});
