// The Python client's example on real Docker: the rl-environment-ops template is deployed through the
// API on a real sidecar, then examples/episodes.py runs episodes of it in parallel from threads (each
// a fork of the whole stack, Postgres and Redis included), grades them and prints the rewards.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { removeDir, tempDir } from '../cli/harness.ts';
import { finished, type Real, startReal } from '../e2e/real.ts';
import { ensureTemplateImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { installPythonClient, PYTHON } from './python-support.ts';

describe('the Python episode loop on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let dir: string;
  let site: string;
  before(async () => {
    await ensureTemplateImages();
    dir = tempDir('svc-py-docker-');
    site = installPythonClient(dir);
    r = await startReal();
  });
  after(async () => {
    await r?.close();
    removeDir(dir);
  });

  test('examples/episodes.py: two episodes in parallel, the right answer gets 1 and the wrong one 0', async () => {
    const tpl = (await r.t.req('GET', '/v1/templates')).body.templates.find(
      (x: any) => x.name === 'rl-environment-ops',
    );
    await r.t.req('POST', '/v1/projects', { body: { name: 'py-ops' } });
    const d = await r.t.req('POST', '/v1/projects/py-ops/deploy', {
      body: { compose: tpl.compose, warm: tpl.warm },
    });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    const { deployment } = await finished(r.t, d.body.deployment.ID);
    assert.equal(deployment.Status, 'succeeded', deployment.Error);

    const run = await promisify(execFile)(
      PYTHON,
      [
        'clients/python/examples/episodes.py',
        '--version',
        deployment.VersionID,
        '--episodes',
        '2',
        '--parallel',
        '2',
      ],
      {
        env: {
          PATH: process.env.PATH,
          HOME: dir,
          PYTHONPATH: site,
          SVC_SERVER: r.t.url,
          SVC_API_KEY: r.t.key,
        },
        timeout: 600_000,
      },
    );
    assert.equal(run.stdout, 'episode 1: reward 1\nepisode 2: reward 0\n', run.stderr);
    // Every episode released its sandbox (the destroys finish in the background).
    const liveForks = () =>
      r.t.server.ctx.db.all("SELECT id FROM environments WHERE stage = 'fork' AND status <> 'destroyed'");
    const t0 = Date.now();
    while ((await liveForks()).length > 0) {
      assert.ok(Date.now() - t0 < 120_000, `forks left: ${JSON.stringify(await liveForks())}`);
      await new Promise((res) => setTimeout(res, 500));
    }
  });
});
