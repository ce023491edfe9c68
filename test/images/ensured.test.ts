// CI runs on a fresh machine with no registry: a test that runs a local image must build it
// itself, whatever ran before it. This reads every test file (and the local modules it imports,
// transitively) for the test images' names and checks that the file calls the ensure that builds
// each one. A file that only names an image (a payload refused before anything runs) says so with
// a `test-images: named only` comment and its reason.
import assert from 'node:assert/strict';
import { existsSync, globSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');
const DEFINER = join(ROOT, 'test/support/images.ts');

const BUSYBOX = /\bBUSYBOX_IMAGE\b|svc-test\/busybox/;
const PGREDIS = /\bPGREDIS_IMAGE\b|svc-test\/pgredis/;
const ENSURES_BUSYBOX = /\bensureTestImages\(|\bensureTemplateImages\(/;
const ENSURES_PGREDIS = /\bensureTestImages\(\{\s*postgres:\s*true\s*\}\)|\bensureTemplateImages\(/;
const NAMED_ONLY = /test-images: named only\b/;
const IMPORT = /\bfrom\s+'(\.{1,2}\/[^']+\.ts)'/g;

/** The text of `file` and of every local module it imports, transitively (the images' definer excluded). */
function reachable(file: string, seen = new Set<string>()): string[] {
  if (seen.has(file) || file === DEFINER || !existsSync(file)) return [];
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  const out = [text];
  for (const m of text.matchAll(IMPORT)) out.push(...reachable(resolve(dirname(file), m[1]), seen));
  return out;
}

/** What is wrong with one test file: the images it runs without building them. */
export function missingEnsures(own: string, reached: string[]): string[] {
  if (NAMED_ONLY.test(own)) return [];
  const problems: string[] = [];
  if (reached.some((t) => PGREDIS.test(t)) && !ENSURES_PGREDIS.test(own))
    problems.push('uses svc-test/pgredis without ensureTestImages({ postgres: true })');
  if (reached.some((t) => BUSYBOX.test(t)) && !ENSURES_BUSYBOX.test(own))
    problems.push('uses svc-test/busybox without ensureTestImages()');
  return problems;
}

test('the rule: an image named (here or in a local import) needs its ensure call in the test file', () => {
  const pg = "const s = svc('app', PGREDIS_IMAGE);";
  assert.deepEqual(missingEnsures(`await ensureTestImages();\n${pg}`, [pg]), [
    'uses svc-test/pgredis without ensureTestImages({ postgres: true })',
  ]);
  assert.deepEqual(missingEnsures(`await ensureTestImages({ postgres: true });\n${pg}`, [pg]), []);
  const helper = 'image: svc-test/busybox:latest';
  assert.deepEqual(missingEnsures('deploy();', ['deploy();', helper]), [
    'uses svc-test/busybox without ensureTestImages()',
  ]);
  assert.deepEqual(missingEnsures('await ensureTemplateImages();', ['', helper, pg]), []);
  assert.deepEqual(missingEnsures('// test-images: named only (refused first)', [helper]), []);
});

test('every test file that runs a test image builds it itself', () => {
  const files = globSync('**/*.test.ts', { cwd: ROOT, exclude: (p) => p.includes('node_modules') });
  assert.ok(files.length > 100, `found only ${files.length} test files under ${ROOT}`);
  const problems: string[] = [];
  for (const rel of files) {
    const file = join(ROOT, rel);
    const [own, ...imported] = reachable(file);
    for (const p of missingEnsures(own, [own, ...imported])) problems.push(`${relative(ROOT, file)}: ${p}`);
  }
  assert.deepEqual(problems, []);
});
