// One program entry bundled by esbuild into one CommonJS file: every release artifact (release/)
// and, under --dev with no CLI build, the CLI the control plane serves (dev-cli.ts). esbuild is a
// development dependency, loaded only when a bundle is made.
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** The repository root: entries are named relative to it. */
export const SOURCE_ROOT = resolve(import.meta.dirname, '../..');

export interface BundleOptions {
  /** Module that exports `main(argv): Promise<number | void>`, relative to the repository root. */
  entry: string;
  /** Where the bundle is written; without one it is only returned. */
  outfile?: string;
  version: string;
  /** esbuild target, e.g. node24 for a SEA, node20 for the npm package. */
  target: string;
  /** Prepended to the output, e.g. a shebang. */
  banner?: string;
}

/** One CommonJS file with everything but native optional helpers (never used here) inlined. */
export async function bundle(o: BundleOptions): Promise<Buffer> {
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    stdin: {
      contents: `import { main } from './${o.entry}';
Promise.resolve(main(process.argv.slice(2))).then((code) => {
  if (typeof code === 'number') process.exitCode = code;
});`,
      resolveDir: SOURCE_ROOT,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: o.target,
    write: false,
    external: ['cpu-features', '*.node'],
    define: { 'process.env.SVC_BUILD_VERSION': JSON.stringify(o.version) },
    banner: o.banner ? { js: o.banner } : undefined,
    logLevel: 'warning',
    // import.meta is empty in a CommonJS bundle: code relying on it would break only at run time.
    logOverride: { 'empty-import-meta': 'error' },
  });
  const code = Buffer.from(result.outputFiles[0].contents);
  if (o.outfile) writeFileSync(o.outfile, code);
  return code;
}
