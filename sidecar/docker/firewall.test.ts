// The host firewall rules of deny stacks (issue 15 batches them): adding is idempotent and
// completes a half-present set, removing takes every copy of one environment's rules and nothing
// of another's, also when two removals race. Runs on this machine's iptables in a chain of its own.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { tier } from '../../test/support/tiers.ts';
import {
  BRIDGE_PREFIX,
  isolateBridge,
  isolationRules,
  listIsolationRules,
  ownsRule,
  pruneIsolationChain,
  releaseBridge,
} from './firewall.ts';
import { bridgeName } from './render.ts';

const skip = tier('docker'); // the docker tier runs as root with iptables, as svcd does
const opts = { chain: `SVCT-${randomBytes(3).toString('hex')}` };
const tag = randomBytes(3).toString('hex');
const envA = `env_fwa${tag}`;
const envB = `env_fwb${tag}`;
const brA = `svct${tag}a`;
const brB = `svct${tag}b`;

const rulesOf = async (bridge: string) => (await listIsolationRules(opts)).filter((r) => r.includes(bridge));
/** The INPUT rules that jump to the test's chain. */
const jumps = () =>
  execFileSync('iptables', ['-S', 'INPUT'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.startsWith('-A INPUT ') && l.endsWith(` -j ${opts.chain}`));
const families = async () => new Set((await listIsolationRules(opts)).map((r) => r.split(' ')[0])).size;

describe('firewall rules of deny stacks', { skip }, () => {
  after(async () => {
    await releaseBridge(brA, envA, opts);
    await releaseBridge(brB, envB, opts);
    assert.equal(await pruneIsolationChain(opts), true);
    assert.deepEqual(jumps(), []);
  });

  it('isolating twice leaves one copy of each rule, in order, and the INPUT jump once', async () => {
    await isolateBridge(brA, envA, opts);
    await isolateBridge(brA, envA, opts);
    await isolateBridge(brB, envB, opts);
    const a = await rulesOf(brA);
    const n = await families();
    assert.equal(a.length, 3 * n, a.join('\n'));
    assert.deepEqual(
      a.slice(0, 3).map((r) => / -j (\w+)/.exec(r)?.[1]),
      ['RETURN', 'REJECT', 'DROP'],
    );
    assert.deepEqual(jumps(), [`-A INPUT -i svc+ -j ${opts.chain}`]);
  });

  it('only packets from the stacks’ bridges enter the chain; a jump for every packet is replaced', async () => {
    // What earlier versions installed: the host's own traffic walked three rules per deny stack.
    execFileSync('iptables', ['-I', 'INPUT', '1', '-j', opts.chain]);
    assert.equal(jumps().length, 2);
    await isolateBridge(brA, envA, opts);
    assert.deepEqual(jumps(), [`-A INPUT -i svc+ -j ${opts.chain}`]);
    assert.equal(bridgeName(envA).startsWith(BRIDGE_PREFIX), true);
  });

  it('a half-present set is completed', async () => {
    const drop = isolationRules(brA, envA)[2];
    execFileSync('iptables', ['-D', opts.chain, ...drop]);
    assert.equal((await rulesOf(brA)).filter((r) => r.startsWith('iptables ')).length, 2);
    await isolateBridge(brA, envA, opts);
    assert.equal((await rulesOf(brA)).filter((r) => r.startsWith('iptables ')).length, 3);
  });

  it('release removes every copy of the env’s rules and nothing of another env’s, also when two race', async () => {
    execFileSync('iptables', ['-A', opts.chain, ...isolationRules(brA, envA)[1]]); // a stray duplicate
    await Promise.all([releaseBridge(brA, envA, opts), releaseBridge(brA, envA, opts)]);
    assert.deepEqual(await rulesOf(brA), []);
    assert.equal((await rulesOf(brB)).length, 3 * (await families()));
  });

  it('a rule is the env’s only by both its bridge and its comment', () => {
    const line = `-A X -i ${brA} -m comment --comment "svc:${envA}" -j DROP`;
    assert.equal(ownsRule(line, brA, envA), true);
    assert.equal(ownsRule(line, brB, envA), false);
    assert.equal(ownsRule(line, brA, `${envA}x`), false);
  });
});
