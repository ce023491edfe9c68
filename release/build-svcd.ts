// Builds the sidecar as one self-contained executable (Node single-executable application):
//   node release/build-svcd.ts [--out bin]
// writes <out>/svcd-linux-<arch> for this machine's architecture, which the control plane serves
// at /svcd (SVC_RELEASES_DIR, default bin) so the join command's download works.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';

const { values } = parseArgs({
  options: { out: { type: 'string', default: 'bin' }, version: { type: 'string' } },
});
const root = resolve(import.meta.dirname, '..');
const arch = process.arch === 'x64' ? 'amd64' : process.arch;
const outDir = resolve(values.out as string);
const target = join(outDir, `svcd-linux-${arch}`);
const version =
  values.version ??
  process.env.SVC_BUILD_VERSION ??
  execFileSync('git', ['-C', root, 'describe', '--always', '--dirty'], { encoding: 'utf8' }).trim();
const work = mkdtempSync(join(tmpdir(), 'svcd-sea-'));
const started = Date.now();

try {
  // One CommonJS file: the SEA entry must be a script. The optional native helpers of ssh2
  // (reached only through dockerode's ssh:// transport, never used here) stay out.
  await build({
    stdin: {
      contents: `import { main } from './sidecar/main.ts'; void main(process.argv.slice(2));`,
      resolveDir: root,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    outfile: join(work, 'svcd.cjs'),
    external: ['cpu-features', '*.node'],
    define: { 'process.env.SVC_BUILD_VERSION': JSON.stringify(version) },
    logLevel: 'warning',
  });
  writeFileSync(
    join(work, 'sea.json'),
    JSON.stringify({
      main: join(work, 'svcd.cjs'),
      output: join(work, 'svcd.blob'),
      disableExperimentalSEAWarning: true,
    }),
  );
  execFileSync(process.execPath, ['--experimental-sea-config', join(work, 'sea.json')], { stdio: 'inherit' });
  mkdirSync(outDir, { recursive: true });
  copyFileSync(process.execPath, `${target}.tmp`);
  execFileSync(
    process.execPath,
    [
      resolve(root, 'node_modules/postject/dist/cli.js'),
      `${target}.tmp`,
      'NODE_SEA_BLOB',
      join(work, 'svcd.blob'),
      '--sentinel-fuse',
      'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
    ],
    { stdio: 'ignore' },
  );
  chmodSync(`${target}.tmp`, 0o755);
  execFileSync('mv', [`${target}.tmp`, target]);
  process.stdout.write(
    `built ${target} (svcd ${version}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
