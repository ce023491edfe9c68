// The image form of POST /v1/sandboxes on real Docker through a real svcd, under runc and gVisor.
// With egress deny (the default) its one container has no network at all, only loopback: the
// egress probe still verifies the denial before the sandbox is returned, its volume forks with
// the version, the fork has no network either, and destroy leaves nothing (no network to leave).
// With egress allow it keeps a network of its own.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { runtimeRows } from '../support/runtimes.ts';
import { tier } from '../support/tiers.ts';
import { createProgress, exec, finished, leftovers, type Real, startReal } from './real.ts';

/** The interfaces a container sees, from /proc/net/dev (gVisor's own view under gVisor). */
async function interfaces(r: Real, env: string): Promise<string[]> {
  const out = await exec(r.t, env, 'main', ['cat', '/proc/net/dev']);
  assert.equal(out.exit_code, 0, JSON.stringify(out));
  return out.stdout
    .split('\n')
    .filter((l: string) => l.includes(':'))
    .map((l: string) => l.split(':')[0].trim())
    .sort();
}

async function destroy(r: Real, env: string) {
  const d = await r.t.req('DELETE', `/v1/envs/${env}`);
  assert.equal((await finished(r.t, d.body.deployment.ID)).deployment.Status, 'succeeded');
  assert.deepEqual(leftovers(env), []);
}

describe('image sandboxes on real Docker', { skip: tier('docker') }, async () => {
  const rows = tier('docker') ? [] : await runtimeRows();
  let r: Real;
  before(async () => {
    await ensureTestImages();
    r = await startReal();
  });
  after(async () => r?.close());

  for (const { runtime, skip } of rows)
    test(`under ${runtime}: deny has loopback only, verified; its fork too; allow keeps its network`, {
      skip,
    }, async () => {
      const c = await r.t.req('POST', '/v1/sandboxes', {
        body: { image: BUSYBOX_IMAGE, runtime, cmd: ['sleep', '3600'] },
      });
      assert.equal(c.status, 201, JSON.stringify(c.body));
      const env = c.body.environment.ID;
      assert.ok((await createProgress(r.t, env)).includes('healthy; egress denied (verified)'));
      assert.deepEqual(await interfaces(r, env), ['lo']);
      assert.deepEqual(
        leftovers(env).filter((o) => o.startsWith('network ')),
        [],
        'no network was made',
      );
      const w = await exec(r.t, env, 'main', ['sh', '-c', 'echo one > /work/f']);
      assert.equal(w.exit_code, 0, JSON.stringify(w));

      // The version's snapshot was taken before the write: the fork starts from it.
      const f = await r.t.req('POST', '/v1/sandboxes', {
        body: { from_version: c.body.deployment.VersionID },
      });
      assert.equal(f.status, 201, JSON.stringify(f.body));
      const fork = f.body.environment.ID;
      assert.deepEqual(await interfaces(r, fork), ['lo']);
      const seen = await exec(r.t, fork, 'main', ['sh', '-c', 'cat /work/f 2>/dev/null; echo two > /work/f']);
      assert.equal(seen.stdout, '');
      assert.equal((await exec(r.t, env, 'main', ['cat', '/work/f'])).stdout, 'one\n');

      const a = await r.t.req('POST', '/v1/sandboxes', {
        body: { image: BUSYBOX_IMAGE, runtime, cmd: ['sleep', '3600'], egress: 'allow', volumes: [] },
      });
      assert.equal(a.status, 201, JSON.stringify(a.body));
      const open = a.body.environment.ID;
      assert.ok((await interfaces(r, open)).length > 1, 'an allowed sandbox has a network interface');
      assert.equal(leftovers(open).filter((o) => o.startsWith('network ')).length, 1);

      for (const e of [env, fork, open]) await destroy(r, e);
    });
});
