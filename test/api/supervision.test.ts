// The supervision svc-server expects (README "Supervision"): the shipped systemd unit restarts it
// after every exit, as svcd's unit does, and runs this checkout's program with its pinned Node.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { UNIT as SVCD_UNIT } from '../../sidecar/install.ts';

/** `Key=value` lines of a unit, by key (the last one wins, as systemd reads them). */
function keys(unit: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of unit.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0 && !line.startsWith('#')) out.set(line.slice(0, at), line.slice(at + 1));
  }
  return out;
}

test('release/svc-server.service restarts the server after every exit, as svcd.service does', () => {
  const server = keys(readFileSync(new URL('../../release/svc-server.service', import.meta.url), 'utf8'));
  const svcd = keys(SVCD_UNIT);
  assert.equal(server.get('Restart'), 'always');
  for (const key of ['Restart', 'RestartSec', 'StartLimitIntervalSec', 'LimitNOFILE', 'WantedBy'])
    assert.equal(server.get(key), svcd.get(key), `${key} as in svcd's unit`);
  const [node, program] = (server.get('ExecStart') ?? '').split(' ');
  assert.equal(node, '/opt/svc/node_modules/.bin/node', 'the Node the checkout pins');
  assert.ok(program.startsWith('/opt/svc/'), program);
  assert.ok(existsSync(new URL(`../../${program.slice('/opt/svc/'.length)}`, import.meta.url)), program);
  assert.ok(server.get('TimeoutStopSec'), 'a bound on the graceful stop');
});
