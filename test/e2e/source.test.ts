// Push-to-deploy of a real-shaped repository on real Docker: the GitHub stand-in serves the
// repository's archive (what `git archive` makes of it) through the tarball API's 302, and the
// compose file, in a subdirectory of the repository, uses build: (a Dockerfile elsewhere in the
// repository, from a local base image), .env beside it and a relative read-only bind (`../conf`).
// The deployment runs, the files are there, and the version records the context digest; once the
// environment is destroyed, the sidecar removes the image it built.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { codehostOwner } from '../support/codehost.ts';
import { FakeGitHub } from '../support/fakes/github.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import type { TestServer } from '../support/server.ts';
import { tier } from '../support/tiers.ts';
import { installationCreated, pushPayload, sendWebhook } from '../support/webhooks.ts';
import { exec, finished, IDLE_COMMAND, type Real, startReal } from './real.ts';

const SHA = 'd'.repeat(40);
// The sidecar keeps no unused built image as a cache here, so a destroy collects the image at once.
process.env.SVC_BUILD_KEEP = '0';
const COMPOSE = `
services:
  app:
    build:
      context: ../app
      args: {GREETING: "\${GREETING}"}
    command: ${IDLE_COMMAND}
    environment: {MODE: "\${MODE:-dev}"}
    volumes: ["../conf:/etc/app:ro"]
`;

describe('deploy from source on real Docker', { skip: tier('docker') }, () => {
  let r: Real;
  /** The server as the installation owner's team. */
  let t: TestServer;
  let gh: FakeGitHub;
  let image = '';

  before(async () => {
    await ensureTestImages();
    gh = await new FakeGitHub().start();
    gh.repos.push({
      full_name: 'acme/stack',
      default_branch: 'main',
      private: true,
      installation: 91,
      branches: { main: SHA },
      files: {
        [SHA]: {
          'deploy/compose.yaml': COMPOSE,
          'deploy/.env': 'GREETING=hello-from-the-repo\nMODE=prod\n',
          'app/Dockerfile': `FROM ${BUSYBOX_IMAGE}\nARG GREETING\nRUN echo "$GREETING" > /greeting\nCOPY motd /motd\n`,
          'app/motd': 'built from the pushed commit\n',
          // A new context (and image tag) on every run: the deployment really builds.
          'app/nonce': randomUUID(),
          'conf/app.conf': 'setting=from-repo\n',
        },
      },
    });
    r = await startReal({ env: gh.env(), join: false });
    assert.equal((await sendWebhook(r.t, 'installation', installationCreated(91, 'acme'))).status, 200);
    // Linking needs a user the code host lets see the installation: their team owns the project
    // and joins the host.
    ({ s: t } = await codehostOwner(r.t, gh, 'acme-owner', [91], [91]));
    const jt = await t.req('POST', '/v1/join-tokens', { body: {} });
    assert.equal(jt.status, 201, JSON.stringify(jt.body));
    await r.startSidecar(jt.body.token);
    const p = await t.req('POST', '/v1/projects', { body: { name: 'stack', source: 'github:acme/stack' } });
    assert.equal(p.status, 201, JSON.stringify(p.body));
    const src = await t.req('POST', '/v1/projects/stack/source', {
      body: { installation_id: 91, compose_path: 'deploy/compose.yaml' },
    });
    assert.equal(src.status, 200, JSON.stringify(src.body));
  });
  after(async () => {
    await r?.close();
    await gh?.close();
    if (image) execFileSync('docker', ['image', 'rm', '-f', image], { stdio: 'ignore' });
  });

  test('a push deploys the repository (build:, .env, ../conf), the version records the context digest; destroy removes the built image', async () => {
    const push = await sendWebhook(t, 'push', pushPayload('acme/stack', 'main', SHA, 91));
    assert.equal(push.status, 200, JSON.stringify(push.body));
    const [out] = push.body.projects;
    assert.ok(out.deployment, JSON.stringify(out));
    const { deployment, phases } = await finished(t, out.deployment);
    assert.equal(deployment.Status, 'succeeded', `${deployment.Error}\n${r.log().slice(-3000)}`);
    const got = await exec(t, deployment.EnvID, 'app', [
      'sh',
      '-c',
      'cat /greeting /motd /etc/app/app.conf; echo $MODE; touch /etc/app/x 2>/dev/null && echo rw || echo ro',
    ]);
    assert.equal(
      got.stdout,
      'hello-from-the-repo\nbuilt from the pushed commit\nsetting=from-repo\nprod\nro\n',
    );

    const version = (await t.req('GET', `/v1/envs/${deployment.EnvID}/versions`)).body.versions.at(-1);
    image = version.Spec.services[0].image;
    assert.match(image, /^svc-build:[0-9a-f]{64}$/);
    const up = await t.server.ctx.db.get<{ id: string; sha256: string; bytes: number }>(
      'SELECT id, sha256, bytes FROM uploads WHERE id = ?',
      [version.Spec.context.upload],
    );
    assert.ok(up, 'the repository archive is an upload');
    assert.deepEqual(version.Spec.context, {
      upload: up.id,
      sha256: up.sha256,
      bytes: Number(up.bytes),
      compose_path: 'deploy/compose.yaml',
    });
    const prepare = phases.find((p: any) => p.Name === 'prepare').Evidence;
    assert.equal(prepare.context, up.sha256, 'the deployment evidence names the context digest');
    assert.match(prepare.digests.app, /^sha256:[0-9a-f]{64}$/);
    const events = (await t.req('GET', `/v1/events?subject=dep:${deployment.ID}`)).body.events;
    const source = events.find((e: any) => e.Kind === 'deployment.source');
    assert.equal(source?.Body?.context, up.sha256);

    const inspect = () => {
      try {
        execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore' });
        return true;
      } catch {
        return false;
      }
    };
    assert.ok(inspect(), 'the built image is there while the environment runs');
    const destroyed = await t.req('DELETE', `/v1/envs/${deployment.EnvID}`);
    assert.equal(destroyed.status, 202, JSON.stringify(destroyed.body));
    assert.equal((await finished(t, destroyed.body.deployment.ID)).deployment.Status, 'succeeded');
    assert.equal(inspect(), false, 'no environment uses it any more: the sidecar removed it');
  });
});
