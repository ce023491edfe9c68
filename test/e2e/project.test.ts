// A real-shaped project on real Docker: the compose file's directory uploaded as the context
// (PUT /v1/uploads), a build: service from a local base image, a relative read-only bind, .env
// interpolation, env_file: and a file secret; fork and rollback keep the context; a redeploy of
// the same bytes reuses the built image; refused paths are refused by name.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { versionDigests } from '../../server/envs/store.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';
import { exec, finished, type Real, startReal, upload, writeProject } from './real.ts';

const IDLE = `["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]`;
const COMPOSE = `
services:
  app:
    build:
      context: ./app
      args: {GREETING: "\${GREETING}"}
    command: ${IDLE}
    env_file: [app.env]
    environment: {MODE: "\${MODE:-dev}"}
    volumes: ["./conf:/etc/app:ro", "./state:/state", "data:/data"]
    secrets: [token]
  worker:
    image: ${BUSYBOX_IMAGE}
    user: "1000:1000"
    command: ${IDLE}
    volumes: ["./shared:/shared"]
volumes: {data: {}}
secrets:
  token: {file: ./secrets/token.txt}
`;

/** Progress lines of the latest command of a kind sent for an environment. */
async function progressOf(r: Real, envId: string, kind: string): Promise<string[]> {
  const cmd = await r.t.server.ctx.db.get<{ id: string }>(
    'SELECT id FROM commands WHERE env_id = ? AND kind = ? ORDER BY created_at DESC, id DESC LIMIT 1',
    [envId, kind],
  );
  assert.ok(cmd, `no ${kind} for ${envId}`);
  const ev = await r.t.req('GET', `/v1/events?subject=cmd:${cmd.id}`);
  assert.equal(ev.status, 200, JSON.stringify(ev.body));
  return ev.body.events.map((e: any) => e.Body?.message ?? e.body?.message ?? '');
}

describe('project contexts on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  let dir: string;
  let ctxId: string;
  let env: string;
  const built = new Set<string>();
  const deploy = async (body: Record<string, unknown>) => {
    const d = await r.t.req('POST', '/v1/projects/proj/deploy', { body });
    assert.equal(d.status, 202, JSON.stringify(d.body));
    return finished(r.t, d.body.deployment.ID);
  };
  before(async () => {
    await ensureTestImages();
    r = await startReal();
    await r.t.req('POST', '/v1/projects', { body: { name: 'proj', kind: 'rl-environment' } });
    dir = writeProject({
      '.env': 'GREETING=hello-from-env\nMODE=prod\n',
      'app.env': 'FROM_ENV_FILE=yes\n',
      // An egress-deny stack builds without a network: the RUN step sees no interface but lo.
      'app/Dockerfile': `FROM ${BUSYBOX_IMAGE}\nARG GREETING\nRUN echo "$GREETING" > /greeting && ls /sys/class/net > /net\nCOPY motd /motd\n`,
      'app/motd': 'built into the image\n',
      // A new context (and so a new image tag) on every run: the first deploy really builds.
      'app/nonce': randomUUID(),
      'app/.dockerignore': 'junk\n',
      'app/junk': 'not shipped to the build\n',
      'conf/app.conf': 'setting=1\n',
      'secrets/token.txt': 's3cret',
      'state/.keep': '',
      'shared/seed.txt': 'seed\n',
    });
    ctxId = (await upload(r, dir)).upload;
  });
  after(async () => {
    await r?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    // The images this suite built (every run builds a fresh one).
    for (const image of built) execFileSync('docker', ['image', 'rm', '-f', image], { stdio: 'ignore' });
  });

  test('upload answers 201 with the digest; bad archives and unknown ids are refused', async () => {
    const again = await upload(r, dir);
    assert.match(again.upload, /^upl_/);
    assert.match(again.sha256, /^[0-9a-f]{64}$/);
    const bad = await r.t.req('PUT', '/v1/uploads', {
      raw: Buffer.from('not a tar at all'.repeat(64)),
      headers: { 'content-type': 'application/x-tar' },
    });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    const unknown = await r.t.req('POST', '/v1/projects/proj/deploy', {
      body: { compose: COMPOSE, context: 'upl_0000000000000000000000' },
    });
    assert.equal(unknown.status, 404);
  });

  test('deploys: build, .env, env_file, read-only bind, file secret; the version records digest and image id', async () => {
    const { deployment, phases } = await deploy({ compose: COMPOSE, context: ctxId });
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log().slice(-3000)}`);
    env = deployment.EnvID;
    const out = await exec(r.t, env, 'app', [
      'sh',
      '-c',
      'cat /greeting /net /motd /etc/app/app.conf /run/secrets/token; echo; echo $FROM_ENV_FILE $MODE; ' +
        'ls /etc/app; touch /etc/app/x 2>/dev/null && echo rw || echo ro; echo fork-me > /state/mark',
    ]);
    assert.equal(
      out.stdout,
      'hello-from-env\nlo\nbuilt into the image\nsetting=1\ns3cret\nyes prod\napp.conf\nro\n',
    );
    const prepare = phases.find((p: any) => p.Name === 'prepare').Evidence;
    assert.match(prepare.digests.app, /^sha256:[0-9a-f]{64}$/);
    const v = await r.t.req('GET', `/v1/envs/${env}/versions`);
    const version = v.body.versions.at(-1);
    assert.equal(version.Spec.context.upload, ctxId);
    built.add(version.Spec.services[0].image);
    assert.deepEqual(await versionDigests(r.t.server.ctx.db, version.ID), prepare.digests);
    const lines = await progressOf(r, env, 'env.create');
    assert.ok(
      lines.some((l) => l.startsWith('build app: building from ./app')),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => /^build app: Step 3\/\d+ : RUN echo/.test(l)),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => l.startsWith('project context ')),
      lines.join('\n'),
    );
    const junk = await exec(r.t, env, 'app', ['sh', '-c', 'ls /']);
    assert.ok(!junk.stdout.includes('junk'));
  });

  test('fork and rollback keep the context and what the stack wrote into its binds; no rebuild', async () => {
    const snap = await r.t.req('POST', `/v1/envs/${env}/snapshot`);
    const snapped = await finished(r.t, snap.body.deployment.ID);
    assert.equal(snapped.deployment.Status, 'succeeded', snapped.deployment.Error);
    const f = await r.t.req('POST', `/v1/envs/${env}/fork`, {
      body: { name: 'proj-fork', version: snapped.deployment.VersionID },
    });
    assert.equal(f.status, 202, JSON.stringify(f.body));
    const forked = await finished(r.t, f.body.deployment.ID);
    assert.equal(forked.deployment.Status, 'succeeded', forked.deployment.Error);
    const out = await exec(r.t, forked.deployment.EnvID, 'app', [
      'sh',
      '-c',
      'cat /state/mark /etc/app/app.conf',
    ]);
    assert.equal(out.stdout, 'fork-me\nsetting=1\n');
    const forkLines = await progressOf(r, forked.deployment.EnvID, 'env.fork');
    assert.ok(forkLines.length > 0 && !forkLines.some((l) => l.startsWith('build ')), forkLines.join('\n'));

    await exec(r.t, env, 'app', ['sh', '-c', 'echo changed > /state/mark']);
    const rb = await r.t.req('POST', `/v1/envs/${env}/rollback`, {
      body: { version: snapped.deployment.VersionID },
    });
    const rolled = await finished(r.t, rb.body.deployment.ID);
    assert.equal(rolled.deployment.Status, 'succeeded', rolled.deployment.Error);
    const back = await exec(r.t, env, 'app', ['cat', '/state/mark', '/run/secrets/token']);
    assert.equal(back.stdout, 'fork-me\ns3cret');
  });

  test('a redeploy of the same bytes reuses the built image', async () => {
    const { deployment } = await deploy({ compose: COMPOSE, context: ctxId });
    assert.equal(deployment.Status, 'succeeded', deployment.Error);
    const lines = await progressOf(r, env, 'env.create');
    assert.ok(
      lines.some((l) => l.startsWith('build app: reusing svc-build:')),
      lines.join('\n'),
    );
    assert.ok(!lines.some((l) => l.includes('Step ')), lines.join('\n'));
    assert.ok(!lines.some((l) => l.startsWith('project context ')), 'the same bytes are not fetched again');
  });

  test('refused paths are refused by name, before anything runs', async () => {
    const cases: [string, string][] = [
      ['"../outside:/x"', "'../outside' leaves the project directory"],
      ['"/etc:/x"', "'/etc:/x' is a host bind mount"],
      ['"/var/run/docker.sock:/var/run/docker.sock"', 'host bind mount'],
    ];
    for (const [mount, phrase] of cases) {
      const res = await r.t.req('POST', '/v1/projects/proj/deploy', {
        body: { env: 'refused', compose: COMPOSE.replace('"./conf:/etc/app:ro"', mount), context: ctxId },
      });
      assert.equal(res.status, 400, mount);
      assert.ok(res.body.error.includes(phrase), res.body.error);
    }
    const linkDir = writeProject({ Dockerfile: `FROM ${BUSYBOX_IMAGE}\n` });
    execFileSync('ln', ['-s', '/etc', join(linkDir, 'hostetc')]);
    const linked = await upload(r, linkDir);
    rmSync(linkDir, { recursive: true, force: true });
    const res = await r.t.req('POST', '/v1/projects/proj/deploy', {
      body: {
        env: 'refused',
        compose: `services:\n  a:\n    image: ${BUSYBOX_IMAGE}\n    volumes: ["./hostetc:/x:ro"]\n`,
        context: linked.upload,
      },
    });
    assert.equal(res.status, 400);
    assert.ok(res.body.error.includes("goes through the link 'hostetc' -> '/etc'"), res.body.error);
  });
});
