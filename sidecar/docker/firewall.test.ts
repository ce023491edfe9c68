// The host firewall rules of deny stacks, added in batches: adding is idempotent and
// completes a half-present set, removing takes every copy of one environment's rules and nothing
// of another's, also when two removals race. Runs on this machine's iptables in a chain of its own
// (filter, entered from INPUT, and mangle, entered from FORWARD).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { tier } from '../../test/support/tiers.ts';
import {
  BRIDGE_PREFIX,
  hasPhysdev,
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
/** The rules of a built-in chain that jump to the test's chain: filter INPUT, or mangle FORWARD. */
const jumps = (table = 'filter', from = 'INPUT') =>
  execFileSync('iptables', ['-t', table, '-S', from], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.startsWith(`-A ${from} `) && l.endsWith(` -j ${opts.chain}`));
const PER_ENV = 3 + 2; // filter (to the host) + mangle (forwarded)
/** mangle FORWARD's jump: packets routed out of our bridges, or all from them without physdev. */
const forwardJump = async () =>
  `-A FORWARD -i svc+${(await hasPhysdev('iptables')) ? ' -m physdev ! --physdev-is-bridged' : ''} -j ${opts.chain}`;
const families = async () => new Set((await listIsolationRules(opts)).map((r) => r.split(' ')[0])).size;

describe('firewall rules of deny stacks', { skip }, () => {
  after(async () => {
    await releaseBridge(brA, envA, opts);
    await releaseBridge(brB, envB, opts);
    assert.equal(await pruneIsolationChain(opts), true);
    assert.deepEqual(jumps(), []);
    assert.deepEqual(jumps('mangle', 'FORWARD'), []);
  });

  it('isolating twice leaves one copy of each rule, in order, and each jump once', async () => {
    await isolateBridge(brA, envA, opts);
    await isolateBridge(brA, envA, opts);
    await isolateBridge(brB, envB, opts);
    const a = await rulesOf(brA);
    const n = await families();
    assert.equal(a.length, PER_ENV * n, a.join('\n'));
    assert.deepEqual(
      a.slice(0, PER_ENV).map((r) => / -j (\w+)/.exec(r)?.[1]),
      ['RETURN', 'REJECT', 'DROP', 'DROP', 'DROP'],
    );
    assert.deepEqual(jumps(), [`-A INPUT -i svc+ -j ${opts.chain}`]);
    assert.deepEqual(jumps('mangle', 'FORWARD'), [await forwardJump()]);
  });

  it('only packets from the stacks’ bridges enter the chain; a jump for every packet is replaced', async () => {
    // What earlier versions installed: the host's own traffic walked three rules per deny stack.
    execFileSync('iptables', ['-I', 'INPUT', '1', '-j', opts.chain]);
    assert.equal(jumps().length, 2);
    // And a FORWARD jump in the other form (a kernel that gained or lost physdev).
    const other = (await hasPhysdev('iptables'))
      ? ['-i', 'svc+']
      : ['-i', 'svc+', '-m', 'physdev', '!', '--physdev-is-bridged'];
    execFileSync('iptables', ['-t', 'mangle', '-I', 'FORWARD', '1', ...other, '-j', opts.chain]);
    assert.equal(jumps('mangle', 'FORWARD').length, 2);
    await isolateBridge(brA, envA, opts);
    assert.deepEqual(jumps(), [`-A INPUT -i svc+ -j ${opts.chain}`]);
    assert.deepEqual(jumps('mangle', 'FORWARD'), [await forwardJump()]);
    assert.equal(bridgeName(envA).startsWith(BRIDGE_PREFIX), true);
  });

  it('a half-present set is completed, in order', async () => {
    const inTable = async (table: string) =>
      (await rulesOf(brA)).filter((r) => r.startsWith(`iptables -t ${table} `));
    const rules = isolationRules(brA, envA);
    execFileSync('iptables', ['-D', opts.chain, ...rules.filter[0]]);
    execFileSync('iptables', ['-t', 'mangle', '-D', opts.chain, ...rules.mangle[1]]);
    assert.equal((await inTable('filter')).length, 2);
    assert.equal((await inTable('mangle')).length, 1);
    await isolateBridge(brA, envA, opts);
    assert.deepEqual(
      (await inTable('filter')).map((r) => / -j (\w+)/.exec(r)?.[1]),
      ['RETURN', 'REJECT', 'DROP'],
    );
    assert.equal((await inTable('mangle')).length, 2);
  });

  it('release removes every copy of the env’s rules and nothing of another env’s, also when two race', async () => {
    execFileSync('iptables', ['-A', opts.chain, ...isolationRules(brA, envA).filter[1]]); // a stray duplicate
    await Promise.all([releaseBridge(brA, envA, opts), releaseBridge(brA, envA, opts)]);
    assert.deepEqual(await rulesOf(brA), []);
    assert.equal((await rulesOf(brB)).length, PER_ENV * (await families()));
  });

  it('a rule is the env’s only by both its bridge and its comment', () => {
    const line = `-A X -i ${brA} -m comment --comment "svc:${envA}" -j DROP`;
    assert.equal(ownsRule(line, brA, envA), true);
    assert.equal(ownsRule(line, brB, envA), false);
    assert.equal(ownsRule(line, brA, `${envA}x`), false);
  });
});
