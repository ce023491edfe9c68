// `svc fork --count N`: one request, N forks of one snapshot; the CLI waits for all of them,
// prints one line per fork, and exits 1 when any failed. The host is a fake sidecar.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SIMPLE_COMPOSE } from '../orchestrator/harness.ts';
import { assertExit, assertUsage, type CliWorld, cliWorld, finalLine } from './harness.ts';

describe('svc fork --count', () => {
  let w: CliWorld;
  let alpha: string;
  before(async () => {
    w = await cliWorld('sqlite');
    writeFileSync(join(w.home, 'compose.yaml'), SIMPLE_COMPOSE);
    const p = await w.t.req('POST', '/v1/projects', { body: { name: 'fan' } });
    alpha = p.body.environments[0].ID;
    assertExit(await w.run(['deploy', '--project', 'fan']), 0);
  });
  after(() => w.close());

  const forkLines = (stdout: string) =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('  '))
      .map((l) => l.trim().split(/\s+/).slice(0, 3));

  test('waits for every fork, one line each, then how many succeeded', async () => {
    const r = await w.run(['fork', '--count', '3', '--name', 'roll', alpha]);
    assertExit(r, 0);
    assert.match(r.stdout, /^fan-out fan_\S+: 3 forks of ver_\S+ \(snapshot \S+\)$/m);
    const lines = forkLines(r.stdout);
    assert.deepEqual(lines.map((l) => l[0]).sort(), ['roll-1', 'roll-2', 'roll-3']);
    for (const [, envId, status] of lines) {
      assert.match(envId, /^env_/);
      assert.equal(status, 'succeeded');
    }
    assert.match(r.stdout, /^forks: 3 of 3 succeeded$/m);
  });

  test('one failed fork: its line carries the error and the exit is 1', async () => {
    let seen = 0;
    w.sc.handlers['env.fork'] = () => {
      if (++seen === 2) throw new Error('injected: clone refused');
      return { forked_in: 7, endpoints: {} };
    };
    try {
      const r = await w.run(['fork', '--count', '3', alpha]);
      assertExit(r, 1);
      const lines = forkLines(r.stdout);
      assert.deepEqual(lines.map((l) => l[2]).sort(), ['failed', 'succeeded', 'succeeded']);
      assert.match(r.stdout, /failed .* error: clone: injected: clone refused/);
      assert.match(r.stdout, /^forks: 2 of 3 succeeded$/m);
      assert.match(r.stderr, /^svc: 1 of 3 forks failed$/m);
    } finally {
      delete w.sc.handlers['env.fork'];
    }
  });

  test('--wait=false prints the 202 answer; bad counts are refused', async () => {
    const r = await w.run(['fork', '--count', '2', '--wait=false', alpha]);
    assertExit(r, 0);
    const body = JSON.parse(r.stdout);
    assert.equal(body.forks.length, 2);
    assert.match(body.fanout, /^fan_/);
    assertUsage(await w.run(['fork', '--count', 'many', alpha]), '--count takes a whole number');
    const over = await w.run(['fork', '--count', '101', alpha]);
    assertExit(over, 1);
    assert.match(over.stderr, /count must be <= 100/);
    // Without --count the single fork's output is unchanged.
    const one = await w.run(['fork', alpha]);
    assertExit(one, 0);
    assert.equal(finalLine(one).status, 'succeeded');
  });
});
