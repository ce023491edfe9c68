// The verbs that map to one read or create endpoint: whoami, templates, init, project, cloud,
// host, env reads and events. Output is the API's JSON, indented by two spaces.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertExit, assertFails, type CliWorld, cliWorld } from './harness.ts';

describe('resource verbs', () => {
  let w: CliWorld;
  before(async () => {
    w = await cliWorld('sqlite');
  });
  after(() => w.close());

  const ok = async (args: string[]) => {
    const r = await w.run(args);
    assertExit(r, 0);
    return r;
  };
  /** Runs and checks the output is exactly the API's answer to the same request, indented. */
  const same = async (args: string[], method: string, path: string) => {
    const r = await ok(args);
    const api = await w.t.req(method, path);
    assert.equal(r.stdout, `${JSON.stringify(api.body, null, 2)}\n`);
    return JSON.parse(r.stdout);
  };

  test('whoami', async () => {
    const me = await same(['whoami'], 'GET', '/v1/me');
    assert.equal(me.teams[0].Role, 'key');
  });

  test('templates [--kind K]', async () => {
    const all = await same(['templates'], 'GET', '/v1/templates');
    assert.deepEqual(all.kinds, ['rl-environment', 'agent']);
    const agent = await same(['templates', '--kind', 'agent'], 'GET', '/v1/templates?kind=agent');
    assert.deepEqual(
      agent.templates.map((x: { name: string }) => x.name),
      ['agent-runtime'],
    );
    await same(['templates', '--kind=rl-environment'], 'GET', '/v1/templates?kind=rl-environment');
    assertFails(await w.run(['templates', '--kind', 'nope']), 'svc: kind must be one of');
  });

  test('init writes the template compose, prints the deploy line when it has a warm command, never overwrites', async () => {
    const templates = (await w.t.req('GET', '/v1/templates')).body.templates;
    const ops = templates.find((x: { name: string }) => x.name === 'rl-environment-ops');
    const agent = templates.find((x: { name: string }) => x.name === 'agent-runtime');
    const byKind = await ok(['init', 'rl-environment']);
    const out = join(w.home, 'compose.yaml');
    assert.equal(readFileSync(out, 'utf8'), ops.compose);
    const warm = ops.warm.join(' ');
    assert.equal(
      byKind.stdout,
      'wrote compose.yaml from template rl-environment-ops (rl-environment)\n' +
        `deploy it with: svc deploy --project <project> -f compose.yaml --warm '${warm}'\n`,
    );
    // The printed --warm splits on whitespace back into the template's argv.
    assert.deepEqual(warm.split(/\s+/), ops.warm);

    writeFileSync(out, 'mine\n');
    const again = await w.run(['init', 'agent']);
    assertFails(again, 'svc: compose.yaml already exists');
    assert.equal(readFileSync(out, 'utf8'), 'mine\n');

    const byName = await ok(['init', '--out', 'agent.yaml', 'agent-runtime']);
    assert.equal(readFileSync(join(w.home, 'agent.yaml'), 'utf8'), agent.compose);
    assert.equal(byName.stdout, 'wrote agent.yaml from template agent-runtime (agent)\n');
    assertFails(await w.run(['init', '--out', 'agent.yaml', 'agent']), 'agent.yaml already exists');

    const unknown = await w.run(['init', '--out', 'x.yaml', 'nonsense']);
    assertFails(unknown, "no template named or of kind 'nonsense'");
    assert.equal(existsSync(join(w.home, 'x.yaml')), false);
  });

  test('project create|list|envs', async () => {
    const created = JSON.parse(
      (await ok(['project', 'create', '--kind', 'agent', '--source', 'github:o/r', 'cli-p'])).stdout,
    );
    assert.equal(created.project.Name, 'cli-p');
    assert.equal(created.project.Kind, 'agent');
    assert.equal(created.project.Source, 'github:o/r');
    assert.equal(created.environments[0].Name, 'alpha');
    const plain = JSON.parse((await ok(['project', 'create', 'cli-q'])).stdout);
    assert.equal(plain.project.Kind, 'rl-environment');
    assertFails(await w.run(['project', 'create', 'cli-p']), 'svc: ');
    const list = await same(['project', 'list'], 'GET', '/v1/projects');
    assert.ok(list.projects.some((p: { Name: string }) => p.Name === 'cli-q'));
    const byName = await same(['project', 'envs', 'cli-p'], 'GET', '/v1/projects/cli-p/envs');
    await same(['project', 'envs', created.project.ID], 'GET', `/v1/projects/${created.project.ID}/envs`);
    assert.equal(byName.environments[0].ID, created.environments[0].ID);
    assertFails(await w.run(['project', 'envs', 'no-such-project']), 'svc: ');
  });

  test('cloud connect sends only the flags that were set; cloud list masks the token', async () => {
    const manual = JSON.parse((await ok(['cloud', 'connect', '--name', 'mine', 'manual'])).stdout);
    assert.equal(manual.cloud.Provider, 'manual');
    assert.equal(manual.cloud.Name, 'mine');
    // manual takes no config: one set flag is all that is sent, and the server names it.
    const one = await w.run(['cloud', 'connect', '--location', 'fsn1', 'manual']);
    assertFails(one, 'got location');
    const vm = JSON.parse(
      (
        await ok([
          'cloud',
          'connect',
          '--name',
          'vm',
          '--token',
          'tok-secret',
          '--server-type',
          'cx22',
          'cloudvm',
        ])
      ).stdout,
    );
    assert.equal(vm.cloud.Config.server_type, 'cx22');
    assert.equal(vm.cloud.Config.location, 'nbg1', 'an unset flag leaves the server default');
    assertFails(await w.run(['cloud', 'connect', 'cloudvm']), 'config.token is required');
    const list = await same(['cloud', 'list'], 'GET', '/v1/clouds');
    const listed = list.clouds.find((c: { Name: string }) => c.Name === 'vm');
    assert.equal(listed.Config.token, '\u2022\u2022\u2022');
    assert.ok(!JSON.stringify(list).includes('tok-secret'));
  });

  test('host list, host join-token', async () => {
    const hosts = await same(['host', 'list'], 'GET', '/v1/hosts');
    // The list holds the sidecar and any driver host an earlier test's cloud made, in any order.
    const sidecar = hosts.hosts.find((h: { ID: string }) => h.ID === w.sc.hostId);
    assert.ok(sidecar, JSON.stringify(hosts.hosts.map((h: { ID: string }) => h.ID)));
    assert.equal(sidecar.connected, true);
    const jt = JSON.parse((await ok(['host', 'join-token'])).stdout);
    assert.match(jt.token, /^djt_/);
    assert.equal(jt.expires_in_sec, 3600);
    assert.ok(jt.command.includes(jt.token));
  });

  test('env get|versions|deployments and events of the alpha environment', async () => {
    const p = await w.t.req('POST', '/v1/projects', { body: { name: 'reads' } });
    const alpha = p.body.environments[0].ID;
    const env = await same(['env', 'get', alpha], 'GET', `/v1/envs/${alpha}`);
    assert.equal(env.environment.ID, alpha);
    await same(['env', 'versions', alpha], 'GET', `/v1/envs/${alpha}/versions`);
    await same(['env', 'deployments', alpha], 'GET', `/v1/envs/${alpha}/deployments`);
    const ev = await same(['events', `env:${alpha}`], 'GET', `/v1/events?subject=env:${alpha}`);
    assert.ok(Array.isArray(ev.events));
    assertFails(await w.run(['env', 'get', 'env_nope']), 'svc: ');
    assertFails(await w.run(['events', 'nonsense']), 'svc: subject must be');
    assertFails(await w.run(['deployment', 'get', 'dep_nope']), 'svc: deployment dep_nope not found');
  });
});
