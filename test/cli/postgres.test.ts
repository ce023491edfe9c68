// The CLI smoke suite on the Postgres dialect: sign-in state, a project, a waited deploy, a fork,
// a verify with its reward, and the read verbs, all through the real `svc` program.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AGENT_COMPOSE } from '../orchestrator/harness.ts';
import { tier } from '../support/tiers.ts';
import { assertExit, type CliWorld, cliWorld, finalLine } from './harness.ts';

describe('svc on Postgres', { skip: tier('postgres') }, () => {
  let w: CliWorld;
  before(async () => {
    w = await cliWorld('postgres');
    writeFileSync(join(w.home, 'compose.yaml'), AGENT_COMPOSE);
  });
  after(() => w?.close());

  test('whoami, project create, deploy --wait, fork, verify, env and deployment reads', async () => {
    const ok = async (args: string[]) => {
      const r = await w.run(args);
      assertExit(r, 0);
      return r;
    };
    assert.equal(JSON.parse((await ok(['whoami'])).stdout).teams[0].Role, 'key');
    const created = JSON.parse((await ok(['project', 'create', 'pg-smoke'])).stdout);
    const alpha = created.environments[0].ID;
    const deployed = await ok(['deploy', '--project', 'pg-smoke']);
    assert.equal(finalLine(deployed).status, 'succeeded');
    const fork = await ok(['fork', alpha]);
    assert.equal(finalLine(fork).status, 'succeeded');
    const verify = await ok(['verify', alpha]);
    assert.match(verify.stdout, /^reward: 1 \(source reward\.txt\)$/m);
    const versions = JSON.parse((await ok(['env', 'versions', alpha])).stdout).versions;
    assert.ok(versions.length >= 1);
    const dep = JSON.parse((await ok(['deployment', 'get', finalLine(deployed).id])).stdout);
    assert.equal(dep.deployment.Status, 'succeeded');
    const events = JSON.parse((await ok(['events', `dep:${finalLine(deployed).id}`])).stdout).events;
    assert.ok(events.some((e: { Kind: string }) => e.Kind === 'deployment.finished'));
    assert.equal(JSON.parse((await ok(['project', 'list'])).stdout).projects.length, 1);
  });
});
