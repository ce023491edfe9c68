// Every command payload is checked on receipt against its schema in protocol/payloads.ts: a
// malformed one is refused with the field it got wrong and never reaches a handler; a valid one
// reaches its handler typed, with the schema's defaults filled in.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { COMMAND_KINDS, type Payloads } from '../protocol/commands.ts';
import { type Frame, frame } from '../protocol/frames.ts';
import { bareService } from '../server/compose/testing.ts';
import { PayloadError, readPayload } from './payload.ts';
import { Runner } from './runner.ts';

const service = { name: 'app', image: 'busybox', env: {}, ports: [], volumes: ['work:/work'] };
const create = { version: 'ver_1', services: [service], volumes: ['work'], egress: 'deny' };
const verifier = { image: 'grader', command: ['grade'], collect: ['/out'] };

/** The message readPayload refuses `payload` of `kind` with. */
function refusal(kind: keyof Payloads, payload: unknown): string {
  try {
    readPayload(kind, payload);
  } catch (err) {
    assert.ok(err instanceof PayloadError, String(err));
    return err.message;
  }
  assert.fail(`${kind} ${JSON.stringify(payload)} was accepted`);
}

test('a malformed payload is refused with the field it got wrong', () => {
  const cases: [keyof Payloads, unknown, string][] = [
    ['env.exec', 'run ls', 'payload must be an object'],
    ['env.exec', [], 'payload must be an object'],
    ['env.exec', { cmd: ['ls'] }, 'payload.service must be a string'],
    ['env.exec', { service: 'app', cmd: [] }, 'payload.cmd must be a non-empty list of strings'],
    ['env.exec', { service: 'app', cmd: ['ls', 1] }, 'payload.cmd[1] must be a string'],
    [
      'env.exec',
      { service: 'app', cmd: ['ls'], timeout_sec: 0 },
      'payload.timeout_sec must be an integer from 1 to 86400',
    ],
    [
      'env.exec',
      { service: 'app', cmd: ['ls'], timeout_sec: 1.5 },
      'payload.timeout_sec must be an integer from 1 to 86400',
    ],
    ['env.create', { ...create, egress: 'open' }, "payload.egress must be 'deny' or 'allow'"],
    ['env.create', { ...create, services: [] }, 'payload.services must be a non-empty list of objects'],
    [
      'env.create',
      { ...create, services: [{ ...service, env: undefined }] },
      'payload.services[0].env must be a map',
    ],
    [
      'env.create',
      { ...create, services: [{ ...service, layer_mb: 0 }] },
      'payload.services[0].layer_mb must be a positive integer',
    ],
    ['env.create', { ...create, disk_mb: -1 }, 'payload.disk_mb must be an integer from 1 to 16777216'],
    ['env.snapshot', { name: 7 }, 'payload.name must be a string'],
    ['env.put', { service: 'app', path: '/x' }, 'payload.tar_b64 must be a string'],
    [
      'verify.run',
      { id: 'dep_1', verifier: { ...verifier, timeout_sec: '60' } },
      'payload.verifier.timeout_sec must be an integer from 1 to 86400',
    ],
    [
      'verify.run',
      { id: 'dep_1', verifier: { ...verifier, command: 5 } },
      'payload.verifier.command must be a string or a list of strings',
    ],
  ];
  for (const [kind, payload, message] of cases) assert.equal(refusal(kind, payload), message, kind);
});

test('the domain rules hold after the schema: names, paths, URLs, the agent, the verifier', () => {
  const cases: [keyof Payloads, unknown, string][] = [
    ['env.exec', { service: '../etc', cmd: ['ls'] }, "payload.service '../etc' is not a valid name"],
    ['env.snapshot', { name: 'a/b' }, "payload.name 'a/b' is not a valid name"],
    ['env.create', { ...create, volumes: ['-x'] }, "volume name '-x' is not a valid name"],
    ['env.create', { ...create, services: [{ ...service, image: '' }] }, "service 'app' has no image"],
    ['env.create', { ...create, agent: 'nope' }, "payload.agent 'nope' is not one of the services"],
    ['env.get', { service: 'app', path: 'etc/passwd' }, "path 'etc/passwd' must be absolute without '..'"],
    ['env.get', { service: 'app', path: '/a/../b' }, "path '/a/../b' must be absolute without '..'"],
    [
      'env.put',
      { service: 'app', path: '/x', tar_b64: '', blob: { url: 'file:///etc/shadow', token: 't' } },
      'payload.blob must be {url, token}',
    ],
    [
      'verify.collect',
      { id: 'dep_1', agent_service: 'app', collect: ['out'] },
      "collect path 'out' must be absolute without '..'",
    ],
    [
      'verify.run',
      { id: 'dep_1', verifier: { ...verifier, service: 'app' } },
      'payload.verifier needs exactly one of image or service',
    ],
    [
      'verify.run',
      { id: 'dep_1', verifier: { ...verifier, command: [] } },
      'payload.verifier.command must not be empty',
    ],
    [
      'env.fork',
      { ...create, from_env: 'env_a', from_snapshot: '../x' },
      "payload.from_snapshot '../x' is not a valid name",
    ],
  ];
  for (const [kind, payload, message] of cases) assert.equal(refusal(kind, payload), message, kind);
});

test('a missing field with a schema default is filled in; everything else passes through as sent', () => {
  const p = readPayload('env.create', structuredClone(create));
  assert.equal(p.from_snapshot, '');
  assert.equal(p.warm, null);
  assert.equal(p.disk_mb, 10_240);
  // What the compose parser gives a service that sets nothing else.
  assert.deepEqual(p.services[0], { ...bareService('app', 'busybox'), volumes: ['work:/work'] });
  assert.equal(readPayload('env.exec', { service: 'app', cmd: ['ls'] }).timeout_sec, 120);
  assert.equal(readPayload('env.exec', { service: 'app', cmd: ['ls'], timeout_sec: 5 }).timeout_sec, 5);
  const run = readPayload('verify.run', { id: 'dep_1', verifier: { image: 'g', command: 'grade' } });
  assert.deepEqual([run.refused, run.verifier.collect, run.verifier.timeout_sec], [false, [], 600]);
  assert.deepEqual(readPayload('host.report', undefined), {});
  assert.equal(readPayload('env.create', { ...create, egress: undefined }).egress, 'deny');
});

test('whatever arrives, the check answers with the payload or a PayloadError, never anything else', () => {
  fc.assert(
    fc.property(fc.constantFrom(...COMMAND_KINDS), fc.anything(), (kind, payload) => {
      try {
        readPayload(kind, payload);
      } catch (err) {
        if (!(err instanceof PayloadError)) throw err;
      }
    }),
    { numRuns: 2000 },
  );
});

test('the runner refuses a malformed payload without running the handler; a valid one reaches it typed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-payload-'));
  try {
    const seen: Payloads['env.exec'][] = [];
    const results = new Map<string, Frame>();
    const runner = new Runner(
      dir,
      {
        'env.exec': async (cmd) => {
          seen.push(cmd.payload);
          // Typed by the schema: `cmd` is a list of strings, `timeout_sec` a number.
          return { exit_code: 0, stdout: cmd.payload.cmd.join(' '), stderr: String(cmd.payload.timeout_sec) };
        },
      },
      (f) => {
        if (f.type === 'result') results.set(f.command_id as string, f);
      },
    );
    const send = (id: string, payload: unknown) =>
      runner.handle(frame('command', { command_id: id, kind: 'env.exec', env_id: 'env_p', payload }));
    await send('cmd_bad', { service: 'app', cmd: 'ls -l' });
    assert.deepEqual(
      [results.get('cmd_bad')?.ok, results.get('cmd_bad')?.error],
      [false, 'payload.cmd must be a non-empty list of strings'],
    );
    assert.equal(seen.length, 0, 'the handler never ran');
    await send('cmd_good', { service: 'app', cmd: ['ls', '-l'] });
    assert.equal(results.get('cmd_good')?.ok, true);
    assert.deepEqual(results.get('cmd_good')?.payload, { exit_code: 0, stdout: 'ls -l', stderr: '120' });
    assert.deepEqual(seen, [{ service: 'app', cmd: ['ls', '-l'], timeout_sec: 120 }]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
