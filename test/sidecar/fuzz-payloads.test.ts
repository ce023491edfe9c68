// The real svcd against hostile command payloads of every kind it runs, the live-process (proc.*)
// and file (fs.*) kinds included: generated JSON, and near-valid payloads with one field made
// junk. Each command gets exactly one result (refused with a reason, or done), never a crash, and
// svcd answers a host.report after all of them.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { COMMAND_KINDS } from '../../protocol/commands.ts';
import { SEED } from '../hardening/support/fuzz.ts';
import { exited, svcd, svcdJoinArgs, until } from '../support/svcd.ts';
import { tier } from '../support/tiers.ts';
import { FakeControlPlane } from './control-plane.ts';

/** Plausible shapes the generated junk is mixed into, field by field. */
const NEAR: Record<string, unknown> = {
  service: 'app',
  path: '/tmp/x',
  cmd: ['sh', '-c', 'echo hi'],
  pid: 'proc_x',
  data: 'aGk=',
  rows: 24,
  cols: 80,
  signal: 'TERM',
  follow: 'f_1',
  since: 0,
  depth: 1,
  from: '/a',
  to: '/b',
  size: 3,
  mode: 420,
  max_bytes: 10,
  tty: { rows: 24, cols: 80 },
  env: { A: 'b' },
  timeout_sec: 5,
  blob: { url: 'http://127.0.0.1:1/x', token: 't' },
  upload: { url: 'http://127.0.0.1:1/x', token: 't' },
};
const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.constantFrom(-1, 2 ** 53, 1e308, '', '../../etc/passwd', '/proc/self/root', '\u0000', []),
);
const payloads = fc.oneof(
  fc.jsonValue({ maxDepth: 4 }),
  fc
    .tuple(fc.subarray(Object.keys(NEAR)), fc.constantFrom(...Object.keys(NEAR)), junk)
    .map(([keys, bad, value]) => ({ ...Object.fromEntries(keys.map((k) => [k, NEAR[k]])), [bad]: value })),
);

// Commands that act on an environment name one that does not exist on the host, so nothing real
// is touched; host.report is left out (it has no payload to speak of).
const KINDS = COMMAND_KINDS.filter((k) => k !== 'host.report');
const PER_KIND = 12;

describe('svcd and hostile payloads of every kind', { skip: tier('docker') }, () => {
  let cp: FakeControlPlane;
  let dir: string;
  let child: ReturnType<typeof svcd>;
  before(async () => {
    cp = await new FakeControlPlane().listen();
    dir = mkdtempSync(join(tmpdir(), 'svcd-fuzz-'));
    child = svcd(svcdJoinArgs(cp.url, 'djt_abc', dir).slice(1));
    await until(() => cp.hellos.length > 0, 60_000, 'hello');
  });
  after(async () => {
    child.kill('SIGKILL');
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test(`${PER_KIND} generated payloads for each of ${KINDS.length} kinds: one result each, svcd alive`, async () => {
    const samples = fc.sample(payloads, { numRuns: PER_KIND * KINDS.length, seed: SEED });
    let n = 0;
    for (const kind of KINDS) {
      const ids: string[] = [];
      for (let i = 0; i < PER_KIND; i++) {
        const id = `cmd_fz${n}`;
        cp.send(id, kind, `env_fuzz${n % 7}`, samples[n++]);
        ids.push(id);
      }
      for (const id of ids) {
        const r = await cp.result(id);
        assert.equal(typeof r.ok, 'boolean', `${kind} ${id}: ${JSON.stringify(r)}`);
        if (!r.ok) assert.ok(typeof r.error === 'string' && r.error.length > 0, `${kind}: a reason`);
      }
      assert.equal(child.exitCode, null, `svcd still runs after ${kind}: ${child.out().slice(-2000)}`);
    }
    cp.send('cmd_fz_after', 'host.report', '', {});
    assert.equal((await cp.result('cmd_fz_after')).ok, true);
    assert.doesNotMatch(
      child.out(),
      /uncaughtException|unhandledRejection/,
      'nothing escaped to the process',
    );
    child.kill('SIGTERM');
    assert.equal(await exited(child), 0);
  });
});
