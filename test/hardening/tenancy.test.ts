// Tenancy generated from /openapi.json. Every route with a path id, called by a
// second team with a real object of the first team, answers 404 and changes nothing: not a row
// of the database, not a command to the first team's host. A route added later with a path
// parameter this suite cannot fill fails it, so new routes are covered or excluded explicitly.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import tar from 'tar-stream';
import { AGENT_COMPOSE, deploy, joinFake, type World } from '../orchestrator/harness.ts';
import { assertError, dumpDatabase, otherTeam } from '../support/api.ts';
import { forEachDialect, startTestServer } from '../support/server.ts';

/** Routes whose path id is not a team's object: installations become one only once linked. */
const EXCLUDED: Record<string, string> = {
  'POST /v1/codehost/installations/{id}/link':
    'an installation is the code host’s, not a team’s, until linked: only a user the code host lets see it links it (an API key gets 403), and one linked elsewhere is 409',
};

async function tarOfOneFile(): Promise<Buffer> {
  const pack = tar.pack();
  pack.entry({ name: 'hello.txt' }, 'hi');
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

forEachDialect('tenancy from /openapi.json', (dialect) => {
  let w: World;
  const a: Record<string, string[]> = {};
  before(async () => {
    const t = await startTestServer(dialect, { SVC_DEV_LOGIN: '1' });
    const sc = await joinFake(t);
    const p = await t.req('POST', '/v1/projects', { body: { name: 'team-a-project' } });
    w = { t, sc, project: p.body.project.ID, alpha: p.body.environments[0].ID };
    const done = await deploy(w, AGENT_COMPOSE);
    assert.equal(done.deployment.Status, 'succeeded', JSON.stringify(done.deployment));
    const key = await w.t.req('POST', '/v1/keys', { body: { name: 'a-key' } });
    const cloud = await w.t.req('POST', '/v1/clouds', { body: { provider: 'manual', name: 'a-cloud' } });
    assert.equal(cloud.status, 201, JSON.stringify(cloud.body));
    a.project = ['team-a-project', w.project];
    a.env = [w.alpha];
    a.dep = [done.deployment.ID];
    a.id = [key.body.key.ID];
    a.name = ['a-cloud'];
    a.version = [done.deployment.VersionID];
    a.ver = [done.deployment.VersionID];
    // A live process's id: team B must get 404 whether or not the pid exists on A's host.
    a.pid = ['proc_fake'];
  });
  after(async () => {
    await w.sc.close();
    await w.t.close();
  });

  test('every route with a path id answers 404 to another team and changes nothing', async () => {
    const b = await otherTeam(w.t, 'intruder@example.com');
    const spec = (await w.t.req('GET', '/openapi.json')).body as {
      paths: Record<
        string,
        Record<string, { parameters?: Array<{ in: string; name: string }>; requestBody?: unknown }>
      >;
    };
    const archive = await tarOfOneFile();
    const bodies: Record<string, unknown> = {
      'POST /v1/projects/{project}/deploy': { compose: AGENT_COMPOSE },
      'POST /v1/envs/{env}/rollback': { version: a.version[0] },
      'POST /v1/envs/{env}/exec': { service: 'main', cmd: ['true'] },
      'POST /v1/envs/{env}/processes': { service: 'main', cmd: ['true'] },
      'POST /v1/envs/{env}/processes/{pid}/input': { close: true },
      'POST /v1/envs/{env}/processes/{pid}/signal': { signal: 'TERM' },
      'POST /v1/targets/{name}/sandboxes': { image: 'redis:7' },
      'POST /v1/versions/{ver}/pool': { size: 1 },
      'POST /v1/envs/{env}/fs/move': { service: 'main', from: '/work/a', to: '/work/b' },
      'POST /v1/envs/{env}/fs/mkdir': { service: 'main', path: '/work/d' },
    };
    // B's first request touches its key's LastUsedAt; everything after must change nothing.
    assert.equal((await w.t.req('GET', '/v1/projects', { token: b.key })).status, 200);
    const before = await dumpDatabase(w.t);
    const commandsBefore = w.sc.commands().length;
    const called: string[] = [];
    for (const [template, ops] of Object.entries(spec.paths)) {
      const names = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      if (names.length === 0) continue;
      for (const [method, op] of Object.entries(ops)) {
        const route = `${method.toUpperCase()} ${template}`;
        if (EXCLUDED[route]) continue;
        for (const n of names) assert.ok(a[n], `${route}: no object of team A for {${n}}; extend this suite`);
        const variants = Math.max(...names.map((n) => a[n].length));
        for (let i = 0; i < variants; i++) {
          let path = template;
          for (const n of names)
            path = path.replace(`{${n}}`, encodeURIComponent(a[n][Math.min(i, a[n].length - 1)]));
          const query = (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
          if (query.includes('service')) path += '?service=main&path=/work';
          const opts =
            method === 'put'
              ? { raw: archive, headers: { 'content-type': 'application/x-tar' } }
              : op.requestBody
                ? { body: bodies[route] ?? {} }
                : {};
          const r = await w.t.req(method.toUpperCase(), path, { ...opts, token: b.key });
          assertError(r, 404);
          called.push(`${route} ${path}`);
        }
      }
    }
    // The file API: every route is called (its query is service and path, its PUT any bytes).
    for (const route of ['GET', 'PUT', 'DELETE'].map((m) => `${m} /v1/envs/{env}/fs `))
      assert.ok(
        called.some((c) => c.startsWith(route)),
        `${route}was not called`,
      );
    for (const op of ['stat', 'list', 'move', 'mkdir', 'watch'])
      assert.ok(
        called.some((c) => c.includes(`/fs/${op} `)),
        `fs/${op} was not called`,
      );
    assert.ok(called.length >= 27, `only ${called.length} calls: ${called.join('\n')}`);
    assert.equal(await dumpDatabase(w.t), before, 'a call by team B changed a row');
    assert.equal(w.sc.commands().length, commandsBefore, "a command reached team A's host");
    // Team A still sees all of it.
    for (const path of [
      `/v1/envs/${w.alpha}`,
      `/v1/deployments/${a.dep[0]}`,
      '/v1/projects/team-a-project/envs',
    ]) {
      assert.equal((await w.t.req('GET', path)).status, 200, path);
    }
  });
});
