// The CLI as an npm package: one CommonJS file compiled for Node >= 20 (no type-stripped sources, so
// it runs on the machine's own Node), packed with `npm pack` into <out>/svc-cli-<version>.tgz.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundle } from '../server/releases/bundle.ts';
import { ROOT } from './sea.ts';

export const NPM_NAME = 'svc-cli';

/** npm wants semver: a git-describe version becomes a pre-release of the package's own version. */
export function npmVersion(version: string): string {
  const base = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version as string;
  if (/^\d+\.\d+\.\d+$/.test(version)) return version;
  const tag = version.replace(/[^0-9A-Za-z-]/g, '-').slice(0, 64) || 'dev';
  return `${base}-${tag}`;
}

export async function packCli(out: string, version: string): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'svc-npm-'));
  try {
    await bundle({
      entry: 'cli/main.ts',
      outfile: join(work, 'svc.cjs'),
      version,
      target: 'node20',
      banner: '#!/usr/bin/env node',
    });
    const pkg = {
      name: NPM_NAME,
      version: npmVersion(version),
      description: 'svc, the command-line client of the environment control service',
      license: 'UNLICENSED',
      bin: { svc: 'svc.cjs' },
      files: ['svc.cjs'],
      engines: { node: '>=20' },
    };
    writeFileSync(join(work, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
    writeFileSync(
      join(work, 'README.md'),
      '# svc-cli\n\n`npm install -g svc-cli-<version>.tgz`, then `svc help`.\n',
    );
    const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], {
      cwd: work,
      encoding: 'utf8',
    }).trim();
    return join(out, name.split('\n').pop() as string);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
