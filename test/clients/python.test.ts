// The Python client (clients/python), installed with pip from its folder into a temporary directory and
// run by the system python3's unittest against a real control plane with a fake sidecar as its host.
// The fake host echoes exec commands and keeps what is uploaded, so files come back as they went in.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { posix } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { type CliWorld, cliWorld, removeDir, tempDir } from '../cli/harness.ts';
import { installPythonClient, PYTHON } from './python-support.ts';

describe('the Python client against the real server (fake sidecar)', () => {
  let w: CliWorld;
  let dir: string;
  let site: string;
  before(async () => {
    dir = tempDir('svc-py-');
    site = installPythonClient(dir);
    w = await cliWorld('sqlite', { SVC_DEV_LOGIN: '1' });
    const files = new Map<string, unknown>();
    w.sc.handlers['env.exec'] = (f) => {
      const p = f.payload as { cmd: string[] };
      return { exit_code: 0, stdout: `${p.cmd.join(' ')}\n`, stderr: '' };
    };
    w.sc.handlers['env.put'] = (f) => {
      const p = f.payload as { path: string; tar_b64: string };
      files.set(`${f.env_id}:${p.path}`, p.tar_b64);
      return { path: p.path };
    };
    w.sc.handlers['env.get'] = (f) => {
      const p = f.payload as { path: string };
      return { tar_b64: files.get(`${f.env_id}:${posix.dirname(p.path)}`) ?? '' };
    };
  });
  after(async () => {
    await w?.close();
    removeDir(dir);
  });

  test('python3 -m unittest: every route as a method, typed errors, lifecycle, episodes from threads', async () => {
    const run = await promisify(execFile)(
      PYTHON,
      ['-m', 'unittest', 'discover', '-v', '-s', 'clients/python/tests'],
      {
        env: {
          PATH: process.env.PATH,
          HOME: w.home,
          PYTHONPATH: site,
          PYTHONDONTWRITEBYTECODE: '1',
          ...w.env,
        },
        timeout: 300_000,
      },
    ).catch((err) => err as { code: number; stdout: string; stderr: string });
    const out = `${run.stdout}\n${run.stderr}`;
    assert.ok(!('code' in run) || run.code === 0, out);
    assert.match(run.stderr, /^Ran \d+ tests? in /m, out);
    assert.match(run.stderr, /^OK$/m, out);
    assert.doesNotMatch(run.stderr, /skipped/, out);
  });
});
