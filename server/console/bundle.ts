// Builds the console SPA (console/src, Preact + wouter) with esbuild into console/dist: one
// hashed script, one hashed stylesheet and index.html naming them. Run by `npm ci` (the root
// package's `prepare`) and again by the server at start-up when the sources are newer than the
// build, so `npm ci` then `npx svc-server --dev` or `npm test` always serve the current console.
// The build output is never committed (.gitignore).
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { writeFileAtomicSync } from '../../shared/atomic-file.ts';

export const CONSOLE_ROOT = resolve(import.meta.dirname, '../../console');
export const CONSOLE_SRC = join(CONSOLE_ROOT, 'src');
export const CONSOLE_DIST = join(CONSOLE_ROOT, 'dist');
/** Public path of the console's files under the control plane's origin. */
export const ASSETS_PATH = '/app/assets/';

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** True when console/dist is missing or older than a source file. */
export function consoleStale(): boolean {
  let built: number;
  try {
    built = statSync(join(CONSOLE_DIST, 'index.html')).mtimeMs;
  } catch {
    return true;
  }
  try {
    return newestMtime(CONSOLE_SRC) > built;
  } catch {
    return false; // an installed copy without sources serves what it has
  }
}

export function indexHtml(script: string, style: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>svc console</title>
<link rel="stylesheet" href="${ASSETS_PATH}${style}">
<script type="module" src="${ASSETS_PATH}${script}"></script>
</head>
<body>
<div id="root"></div>
<noscript>The svc console needs JavaScript.</noscript>
</body>
</html>
`;
}

/** Earlier builds' files, once no reader can still be loading them (10 minutes on). */
function removeOldAssets(keep: Set<string>): void {
  const dir = join(CONSOLE_DIST, 'assets');
  const before = Date.now() - 10 * 60_000;
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (!keep.has(name) && statSync(path).mtimeMs < before) rmSync(path, { force: true });
  }
}

/** Bundles the console into console/dist; returns the file names written under assets/. */
export async function buildConsole(): Promise<string[]> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    entryPoints: { app: join(CONSOLE_SRC, 'main.tsx') },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome120', 'firefox120', 'safari17'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    sourcemap: false,
    entryNames: '[name]-[hash]',
    outdir: join(CONSOLE_DIST, 'assets'),
    write: false,
    logLevel: 'silent',
    legalComments: 'none',
  });
  // Hashed names: a build next to a server reading the previous one (parallel test processes)
  // adds files and swaps index.html in one rename, so a reader sees one build or the other.
  mkdirSync(join(CONSOLE_DIST, 'assets'), { recursive: true });
  const names: string[] = [];
  for (const f of result.outputFiles) {
    writeFileSync(f.path, f.contents);
    names.push(basename(f.path));
  }
  const script = names.find((n) => n.endsWith('.js'));
  const style = names.find((n) => n.endsWith('.css'));
  if (!script || !style) throw new Error(`console build produced ${names.join(', ')}`);
  // Written last: its time stamp says the build is complete (consoleStale).
  writeFileAtomicSync(join(CONSOLE_DIST, 'index.html'), indexHtml(script, style));
  removeOldAssets(new Set(names));
  return names;
}

if (import.meta.main) {
  try {
    const names = await buildConsole();
    process.stdout.write(`console built: ${names.join(', ')} in ${CONSOLE_DIST}\n`);
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === 'ERR_MODULE_NOT_FOUND') {
      // An install without dev dependencies has no esbuild; the server says so when asked for /app/.
      process.stdout.write('console not built: esbuild is not installed\n');
    } else {
      process.stderr.write(`console build failed: ${e.message}\n`);
      process.exitCode = 1;
    }
  }
}
