// Layering a step's tests over the task's into one /tests: later files win, and a link of one
// layer never carries the next layer's files out of the copy (the copy is written as root).
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { VerifierSpec } from '../../protocol/spec.ts';
import type { SidecarContext } from '../context.ts';
import { LIMITS } from './limits.ts';
import { graderExtras, layer, treeDigest } from './tests.ts';

const root = mkdtempSync(join(tmpdir(), 'svc-layer-'));
after(() => rmSync(root, { recursive: true, force: true }));

function tree(name: string, files: Record<string, string>, links: Record<string, string> = {}): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  for (const [path, target] of Object.entries(links)) symlinkSync(target, join(dir, path));
  return dir;
}

describe('layered tests', () => {
  it("a later layer's files replace same-named ones; the rest of each layer stays", async () => {
    const task = tree('task', { 'test.sh': 'echo 0\n', 'helpers.sh': 'h\n', 'data/a': 'a\n' });
    const step = tree('step', { 'test.sh': 'echo 1\n', 'expected.txt': 'e\n', 'data/b': 'b\n' });
    const out = join(root, 'out');
    mkdirSync(out);
    await layer(task, out);
    await layer(step, out);
    const read = (p: string) => readFileSync(join(out, p), 'utf8');
    assert.deepEqual(['test.sh', 'helpers.sh', 'expected.txt', 'data/a', 'data/b'].map(read), [
      'echo 1\n',
      'h\n',
      'e\n',
      'a\n',
      'b\n',
    ]);
    assert.equal(await treeDigest(out), await treeDigest(out), 'the digest is of the merged copy');
  });

  it('empty directories count against the file limit: a tree of them past it is refused', async () => {
    const wide = join(root, 'wide');
    mkdirSync(wide);
    for (let i = 0; i <= LIMITS.files; i++) mkdirSync(join(wide, `d${i}`));
    const out = join(root, 'out-wide');
    mkdirSync(out);
    await assert.rejects(layer(wide, out), /more than 20000 files and directories/);
    rmSync(wide, { recursive: true, force: true });
  });

  it("a link of one layer cannot redirect the next layer's files out of the copy", async () => {
    const outside = join(root, 'outside');
    mkdirSync(outside);
    const first = tree('first', { 'd/x': 'x\n' }, { sub: outside, 'evil.sh': join(outside, 'target') });
    const second = tree('second', { 'sub/planted': 'p\n', 'evil.sh': 'overwrite\n', d: 'now a file\n' });
    const out = join(root, 'out2');
    mkdirSync(out);
    await layer(first, out);
    assert.equal(readlinkSync(join(out, 'sub')), outside, 'links are copied as links');
    await layer(second, out);
    assert.equal(existsSync(join(outside, 'planted')), false);
    assert.equal(existsSync(join(outside, 'target')), false);
    assert.ok(lstatSync(join(out, 'sub')).isDirectory());
    assert.equal(readFileSync(join(out, 'evil.sh'), 'utf8'), 'overwrite\n');
    assert.equal(readFileSync(join(out, 'd'), 'utf8'), 'now a file\n');
  });

  it('tests are copied through pinned descriptors: a link on the way is refused, never followed', async () => {
    const dataset = join(root, 'ds');
    mkdirSync(join(dataset, 'files', 'tests', 'deep'), { recursive: true });
    writeFileSync(join(dataset, 'files', 'tests', 'test.sh'), 'echo ok\n');
    symlinkSync('/etc', join(dataset, 'files', 'hostetc'));
    symlinkSync('/etc', join(dataset, 'files', 'tests', 'inner'));
    const ctx = { storage: { volumePath: () => dataset } } as unknown as SidecarContext;
    const work = join(root, 'work');
    mkdirSync(work);
    const verifier = (tests: string | string[]) => ({ tests }) as VerifierSpec;
    const extras = await graderExtras(ctx, 'env_x', verifier('tests'), work);
    assert.deepEqual(extras.binds, [`${work}/tests:/tests:ro`], 'a copy, never the context itself');
    assert.equal(readFileSync(join(work, 'tests', 'test.sh'), 'utf8'), 'echo ok\n');
    assert.equal(readlinkSync(join(work, 'tests', 'inner')), '/etc', 'a link inside is copied as a link');
    for (const tests of ['hostetc', 'hostetc/ssh', 'tests/inner'])
      await assert.rejects(
        graderExtras(ctx, 'env_x', verifier(tests), work),
        /is a link \(-> '\/etc'\)/,
        tests,
      );
    let deep = join(dataset, 'files', 'tests', 'deep');
    for (let i = 0; i < 34; i++) {
      deep = join(deep, 'd');
      mkdirSync(deep);
    }
    await assert.rejects(graderExtras(ctx, 'env_x', verifier('tests'), work), /deeper than 32 levels/);
  });
});
