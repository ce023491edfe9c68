// Installing the Python client for a test: pip from its folder into a temporary directory, with the
// system python3, no index and no build isolation (no network is needed or used).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** pip-installs clients/python into `<dir>/site` (from a copy, so the source folder stays clean). */
export function installPythonClient(dir: string): string {
  const src = join(dir, 'src');
  cpSync('clients/python', src, { recursive: true, filter: (p) => !p.includes('__pycache__') });
  const site = join(dir, 'site');
  execFileSync(
    PYTHON,
    [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--no-build-isolation',
      '--no-deps',
      '--no-index',
      '--target',
      site,
      src,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } },
  );
  return site;
}
