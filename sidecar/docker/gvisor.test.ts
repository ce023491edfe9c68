// Registering runsc with the Docker daemon: the configuration keeps every key it had, gains runsc
// under runtimes once (never replacing a runsc the operator configured; an earlier svcd's entry,
// without the shared root file system, is brought up to date), and a file that is not a
// JSON object is refused rather than overwritten. A spec asking for gvisor on a host without it is
// refused with the reason; the capabilities say which runtimes the host runs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkCreatedRuntime, resolveRuntime, runscEntry, runtimeCapabilities, withRunsc } from './gvisor.ts';

const entry = { path: '/usr/bin/runsc', runtimeArgs: ['--network=host', '--file-access=shared'] };

describe('gVisor registration and runtime choice', () => {
  it('adds runsc to a missing, empty or existing configuration and keeps the other keys', () => {
    for (const text of [null, '', '{}', '{"runtimes": {}}']) {
      assert.deepEqual(JSON.parse(withRunsc(text, entry) as string), { runtimes: { runsc: entry } });
    }
    const kept = JSON.parse(
      withRunsc('{"log-level": "warn", "runtimes": {"kata": {"path": "/k"}}}', entry) as string,
    );
    assert.deepEqual(kept, { 'log-level': 'warn', runtimes: { kata: { path: '/k' }, runsc: entry } });
  });

  it('leaves a configured runsc alone and refuses a file that is not a JSON object', () => {
    assert.equal(withRunsc('{"runtimes": {"runsc": {"path": "/opt/runsc"}}}', entry), null);
    assert.equal(withRunsc(JSON.stringify({ runtimes: { runsc: entry } }), entry), null);
    const earlier = { runtimes: { runsc: { path: '/usr/bin/runsc', runtimeArgs: ['--network=host'] } } };
    assert.deepEqual(JSON.parse(withRunsc(JSON.stringify(earlier), entry) as string), {
      runtimes: { runsc: entry },
    });
    assert.throws(() => withRunsc('[1]', entry), /not a JSON object/);
    assert.throws(() => withRunsc('{"runtimes": []}', entry), /runtimes is not an object/);
    assert.throws(() => withRunsc('{', entry));
  });

  it('registers with --network=host unless SVC_GVISOR_NETWORK says sandbox; nonsense is refused', () => {
    assert.deepEqual(runscEntry('/r', {}).runtimeArgs, ['--network=host', '--file-access=shared']);
    assert.deepEqual(
      runscEntry('/r', { SVC_GVISOR_NETWORK: 'sandbox', SVC_GVISOR_PLATFORM: 'kvm' }).runtimeArgs,
      ['--network=sandbox', '--file-access=shared', '--platform=kvm'],
    );
    assert.throws(() => runscEntry('/r', { SVC_GVISOR_NETWORK: 'bridge' }), /must be host or sandbox/);
  });

  it('resolves the runtime: the spec, else the host default; gvisor without runsc is refused', () => {
    const none = { gvisor: null, default: 'runc' as const, problem: 'runsc is not installed' };
    const able = {
      gvisor: { version: 'x', platform: 'ptrace', network: 'host' },
      default: 'gvisor' as const,
    };
    assert.equal(resolveRuntime(none, undefined), 'runc');
    assert.equal(resolveRuntime(able, undefined), 'gvisor');
    assert.equal(resolveRuntime(able, 'runc'), 'runc');
    assert.throws(
      () => resolveRuntime(none, 'gvisor'),
      /cannot run gvisor environments: runsc is not installed/,
    );
    assert.deepEqual(runtimeCapabilities(none), { runtimes: ['runc'], default_runtime: 'runc' });
    assert.deepEqual(runtimeCapabilities(able).runtimes, ['runc', 'gvisor']);
  });

  it('checks each created container has the environment runtime before anything starts', async () => {
    const engine = (runtimes: Record<string, string>) => ({
      inspect: async (service: string) => ({ HostConfig: { Runtime: runtimes[service] } }) as never,
    });
    await checkCreatedRuntime(engine({ a: 'runsc', b: 'runsc' }), ['a', 'b'], 'gvisor');
    await checkCreatedRuntime(engine({ a: 'runc', b: '' }), ['a', 'b'], 'runc');
    await assert.rejects(
      checkCreatedRuntime(engine({ a: 'runsc', b: 'runc' }), ['a', 'b'], 'gvisor'),
      /service 'b' was created with runtime runc, not runsc/,
    );
  });
});
