// The compose tool: v2 runs as the plugin's own binary when that answers the same
// version as `docker compose`, one process per call instead of three; what it does and how its
// errors read stay those of `docker compose`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { tier } from '../../test/support/tiers.ts';
import { detectComposeTool, runCompose } from './compose-tool.ts';
import { ComposeRunError } from './errors.ts';

describe('compose tool', { skip: tier('docker') }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-compose-tool-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('v2 runs the plugin binary itself, with the same results as docker compose', async () => {
    const tool = await detectComposeTool('v2');
    assert.deepEqual(tool.argv, ['docker', 'compose']);
    assert.ok(tool.program?.[0]?.endsWith('/docker-compose'), JSON.stringify(tool));
    const file = join(dir, 'compose.yaml');
    writeFileSync(file, 'services:\n  main:\n    image: busybox\n');
    const direct = await runCompose(tool, { project: 'svc-tool-test', file }, ['config', '--services']);
    const viaCli = await runCompose({ ...tool, program: undefined }, { project: 'svc-tool-test', file }, [
      'config',
      '--services',
    ]);
    assert.equal(direct.stdout, 'main\n');
    assert.equal(direct.stdout, viaCli.stdout);
  });

  it('its errors name the command as docker compose', async () => {
    const tool = await detectComposeTool('v2');
    await assert.rejects(
      runCompose(tool, { project: 'svc-tool-test', file: join(dir, 'missing.yaml') }, ['config']),
      (err: unknown) => {
        assert.ok(err instanceof ComposeRunError);
        assert.match(
          err.message,
          /^docker compose --ansi never -p svc-tool-test -f .*missing\.yaml config: /,
        );
        return true;
      },
    );
  });
});
