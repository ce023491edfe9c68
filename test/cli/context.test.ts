// svc deploy ships the compose file's directory as the context when the file reads files next to
// it (PUT /v1/uploads, then deploy with context:); svc init --from-harbor writes DIR/compose.yaml.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { tier } from '../support/tiers.ts';
import { assertExit, assertFails, type CliWorld, cliWorld } from './harness.ts';

for (const dialect of ['sqlite', 'postgres'] as const)
  describe(`svc deploy with a project context [${dialect}]`, {
    skip: dialect === 'postgres' && tier(dialect),
  }, () => {
    let w: CliWorld;
    before(async () => {
      w = await cliWorld(dialect);
      await w.t.req('POST', '/v1/projects', { body: { name: 'ctx' } });
    });
    after(() => w.close());

    const write = (files: Record<string, string>) => {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(join(w.home, path, '..'), { recursive: true });
        writeFileSync(join(w.home, path), text);
      }
    };

    test('a build: project is uploaded and deployed with its context; a plain one is not', async () => {
      write({
        'proj/compose.yaml': 'services:\n  app:\n    build: ./app\n    env_file: [app.env]\n',
        'proj/app/Dockerfile': 'FROM busybox\n',
        'proj/app.env': 'A=1\n',
        'proj/.dockerignore': 'secret-notes\n',
        'proj/secret-notes': 'not shipped\n',
        'plain/compose.yaml': 'services:\n  web:\n    image: redis:7\n',
      });
      const r = await w.run(['deploy', '--project', 'ctx', '-f', 'proj/compose.yaml']);
      assertExit(r, 0);
      const create = w.sc.commands('env.create').at(-1)?.payload as any;
      assert.match(create.context.sha256, /^[0-9a-f]{64}$/);
      assert.match(create.context.blob.url, /\/v1\/hosts\/blobs\//);
      assert.equal(create.services[0].env.A, '1');
      const upload = await w.t.server.ctx.db.get<{ id: string; sha256: string }>(
        'SELECT id, sha256 FROM uploads',
      );
      assert.equal(upload?.sha256, create.context.sha256);

      const plain = await w.run(['deploy', '--project', 'ctx', '--env', 'plain', '-f', 'plain/compose.yaml']);
      assertExit(plain, 0);
      const count = await w.t.server.ctx.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM uploads');
      assert.equal(Number(count?.n), 1, 'a plain image stack ships no context');
    });

    test('PUT /v1/uploads needs a key and a tar content type', async () => {
      const raw = Buffer.alloc(1024);
      const anon = await w.t.req('PUT', '/v1/uploads', {
        raw,
        token: false,
        headers: { 'content-type': 'application/x-tar' },
      });
      assert.equal(anon.status, 401);
      const json = await w.t.req('PUT', '/v1/uploads', { body: { not: 'a tar' } });
      assert.equal(json.status, 415, JSON.stringify(json.body));
      assert.match(json.body.error, /send the archive as application\/x-tar/);
    });

    test('a refused path comes back as the one error line', async () => {
      write({ 'bad/compose.yaml': 'services:\n  app:\n    image: busybox\n    volumes: ["../escape:/x"]\n' });
      const r = await w.run(['deploy', '--project', 'ctx', '--env', 'bad', '-f', 'bad/compose.yaml']);
      assertFails(r, "'../escape' leaves the project directory");
    });

    test('../ paths widen the context to the git work tree, recorded with compose_path; --context names it', async () => {
      const compose =
        'services:\n  app:\n    image: busybox\n    env_file: [app.env]\n    volumes: ["../conf/x.conf:/etc/x:ro"]\n';
      write({
        'repo/.git/HEAD': 'ref: refs/heads/main\n',
        'repo/conf/x.conf': 'x=1\n',
        'repo/deploy/compose.yaml': compose,
        'repo/deploy/app.env': 'B=2\n',
        'repo/deploy/.env': 'UNUSED=1\n',
        'loose/conf/x.conf': 'x=1\n',
        'loose/deploy/compose.yaml': compose,
        'loose/deploy/app.env': 'B=2\n',
      });
      const r = await w.run([
        'deploy',
        '--project',
        'ctx',
        '--env',
        'wide',
        '-f',
        'repo/deploy/compose.yaml',
      ]);
      assertExit(r, 0);
      const create = w.sc.commands('env.create').at(-1)?.payload as any;
      assert.deepEqual(create.services[0].binds, [
        { source: 'conf/x.conf', target: '/etc/x', read_only: true },
      ]);
      assert.equal(create.services[0].env.B, '2', 'env_file is read from the compose file’s directory');
      const env = (await w.t.req('GET', '/v1/projects/ctx/envs')).body.environments.find(
        (e: any) => e.Name === 'wide',
      );
      const versions = (await w.t.req('GET', `/v1/envs/${env.ID}/versions`)).body.versions;
      assert.equal(versions.at(-1).Spec.context.compose_path, 'deploy/compose.yaml');

      // Outside a work tree nothing is widened: the server refuses the path by name.
      const loose = await w.run([
        'deploy',
        '--project',
        'ctx',
        '--env',
        'loose',
        '-f',
        'loose/deploy/compose.yaml',
      ]);
      assertFails(loose, "'../conf/x.conf' leaves the project directory");
      // Named, the directory is shipped as given.
      const named = await w.run([
        'deploy',
        '--project',
        'ctx',
        '--env',
        'loose',
        '--context',
        'loose',
        '-f',
        'loose/deploy/compose.yaml',
      ]);
      assertExit(named, 0);
      assertFails(
        await w.run([
          'deploy',
          '--project',
          'ctx',
          '--context',
          'loose/conf',
          '-f',
          'loose/deploy/compose.yaml',
        ]),
        'does not hold the compose file',
      );
      const bare = await w.t.req('POST', '/v1/projects/ctx/deploy', {
        body: { compose, compose_path: 'deploy/compose.yaml' },
      });
      assert.equal(bare.status, 400);
      assert.match(bare.body.error, /compose_path names a place inside a context/);
    });

    test('init --from-harbor writes DIR/compose.yaml once', async () => {
      write({
        'task/task.toml': '[verifier]\ntimeout_sec = 60\n',
        'task/environment/Dockerfile': 'FROM busybox\n',
        'task/tests/test.sh': 'echo 1 > /logs/verifier/reward.txt\n',
      });
      const r = await w.run(['init', '--from-harbor', 'task']);
      assertExit(r, 0);
      assert.ok(existsSync(join(w.home, 'task', 'compose.yaml')));
      assert.match(readFileSync(join(w.home, 'task', 'compose.yaml'), 'utf8'), /x-svc.agent.service: main/);
      assertFails(await w.run(['init', '--from-harbor', 'task']), 'already exists');
      const deployed = await w.run(['deploy', '--project', 'ctx', '--env', 'task', '--harbor', 'task']);
      assertExit(deployed, 0);
      const create = w.sc.commands('env.create').at(-1)?.payload as any;
      assert.ok(create.volumes.includes('svc.context'));
      assert.deepEqual(create.services[0].build, {
        context: 'environment',
        dockerfile: 'Dockerfile',
        args: {},
        target: '',
      });
    });
  });
