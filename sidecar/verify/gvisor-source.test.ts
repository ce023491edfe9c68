// Collecting from a gVisor agent: each declared path is read from the host directory gVisor's gofer
// serves it from (the innermost mount's source, else the root file system), refusals name the path
// as declared, and a path in gVisor's own memory (/tmp) is refused, not reported missing.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type Docker from 'dockerode';
import { copyDeclared } from './copy.ts';
import { gvisorSource } from './gvisor-source.ts';
import { Refusal } from './limits.ts';

const base = mkdtempSync(join(tmpdir(), 'svc-gvisor-collect-'));
const dir = (name: string, files: Record<string, string>) => {
  const d = join(base, name);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(d, path, '..'), { recursive: true });
    writeFileSync(join(d, path), text);
  }
  mkdirSync(d, { recursive: true });
  return d;
};
const merged = dir('merged', { 'etc/answer': 'root fs\n', 'work/answer': 'hidden under the mount\n' });
const work = dir('work', { answer: '42\n', 'deep/note': 'inner\n' });
const deep = dir('deep', { note: 'the deeper mount\n' });
const info = {
  GraphDriver: { Name: 'overlay2', Data: { MergedDir: merged } },
  Mounts: [
    { Source: work, Destination: '/work' },
    { Source: deep, Destination: '/work/deep' },
  ],
} as unknown as Docker.ContainerInspectInfo;

describe('verify collect under gVisor', () => {
  after(() => rmSync(base, { recursive: true, force: true }));

  it('reads each path from its innermost mount, else the root file system', async () => {
    const dest = join(base, 'out1');
    const r = await copyDeclared(gvisorSource(info), ['/work', '/etc/answer', '/nope'], dest);
    assert.deepEqual(r.missing, ['/nope']);
    assert.equal(readFileSync(join(dest, 'work/answer'), 'utf8'), '42\n');
    assert.equal(readFileSync(join(dest, 'etc/answer'), 'utf8'), 'root fs\n');
    const r2 = await copyDeclared(gvisorSource(info), ['/work/deep/note'], join(base, 'out2'));
    assert.equal(r2.files, 1);
    assert.equal(readFileSync(join(base, 'out2/work/deep/note'), 'utf8'), 'the deeper mount\n');
  });

  it('names a symlink by its declared path, and refuses a path in gVisor memory', async () => {
    symlinkSync('/etc/passwd', join(work, 'link'));
    await assert.rejects(
      copyDeclared(gvisorSource(info), ['/work/link'], join(base, 'out3')),
      (err: unknown) => {
        assert.ok(err instanceof Refusal);
        assert.equal(err.path, '/work/link');
        return true;
      },
    );
    await assert.rejects(
      copyDeclared(gvisorSource(info), ['/tmp/notes'], join(base, 'out4')),
      /gVisor's memory/,
    );
  });
});
