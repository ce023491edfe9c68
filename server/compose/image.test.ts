import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ImageSandboxInput, imageSandboxSpec } from './index.ts';
import { assertRefused, assertValidSpec, bareService } from './testing.ts';

const refusesInput = (input: unknown, ...phrases: string[]) =>
  assertRefused(() => imageSandboxSpec(input as ImageSandboxInput), ...phrases);

describe('image sandbox spec', () => {
  it('builds one service main with /work as a volume and egress deny, without a network', () => {
    const spec = imageSandboxSpec({ image: 'python:3.12-slim' });
    assertValidSpec(spec);
    assert.deepEqual(spec, {
      services: [{ ...bareService('main', 'python:3.12-slim'), volumes: ['work:/work'] }],
      volumes: ['work'],
      egress: 'deny',
      agent: null,
      verifier: null,
      network: 'none',
    });
    // An allowed sandbox keeps its network (ports are published on it).
    assert.equal(imageSandboxSpec({ image: 'python:3.12-slim', egress: 'allow' }).network, undefined);
  });

  it('carries cmd, env, ports, volumes and egress allow', () => {
    const spec = imageSandboxSpec({
      image: 'ghcr.io/org/app:1',
      cmd: ['sleep', 'infinity'],
      env: { MODE: 'test', EMPTY: '' },
      ports: ['8080', '9000:9000/udp', '127.0.0.1:3000:3000'],
      volumes: ['/work', '/home/agent/.cache/', '/data'],
      egress: 'allow',
    });
    assertValidSpec(spec);
    const [main] = spec.services;
    assert.deepEqual(main.command, ['sleep', 'infinity']);
    assert.deepEqual(main.env, { MODE: 'test', EMPTY: '' });
    assert.deepEqual(main.ports, ['8080', '9000:9000/udp', '3000:3000']);
    assert.equal(main.volumes.length, 3);
    assert.equal(main.volumes[0], 'work:/work');
    assert.equal(main.volumes[1], 'home_agent_.cache:/home/agent/.cache');
    assert.equal(main.volumes[2], 'data:/data');
    assert.deepEqual(
      spec.volumes,
      main.volumes.map((v) => v.split(':')[0]),
    );
    assert.equal(spec.egress, 'allow');
  });

  it('derives the same volume names every time', () => {
    const a = imageSandboxSpec({ image: 'x', volumes: ['/srv/data', '/a_b'] });
    const b = imageSandboxSpec({ image: 'x', volumes: ['/srv/data', '/a_b'] });
    assert.deepEqual(a, b);
    assert.equal(a.volumes[0], 'srv_data');
  });

  it('allows no volumes and an empty cmd', () => {
    const spec = imageSandboxSpec({ image: 'x', volumes: [], cmd: [] });
    assert.deepEqual(spec.volumes, []);
    assert.equal(spec.services[0].command, null);
  });

  it('refuses ports without egress allow', () => {
    refusesInput({ image: 'x', ports: ['8080'] }, "ports need egress: 'allow'");
    refusesInput({ image: 'x', ports: ['8080'], egress: 'deny' }, "ports need egress: 'allow'");
  });

  it('validates every field', () => {
    refusesInput(null, 'must be an object');
    refusesInput({}, 'image must be a non-empty string');
    refusesInput({ image: '  ' }, 'image must be a non-empty string');
    refusesInput({ image: 'Not An Image' }, 'image sandbox: image', 'not an image reference');
    refusesInput({ image: 'x', egress: 'open' }, "egress must be 'deny' or 'allow'");
    refusesInput({ image: 'x', cmd: 'sleep 1' }, 'cmd must be a list');
    refusesInput({ image: 'x', cmd: ['a', 1] }, 'cmd[1] must be a string');
    refusesInput({ image: 'x', cmd: ['a\0b'] }, 'cmd[0]');
    refusesInput({ image: 'x', env: ['A=1'] }, 'env must be an object');
    refusesInput({ image: 'x', env: { 'A B': '1' } }, "env: 'A B' is not a variable name");
    refusesInput({ image: 'x', env: { A: 1 } }, 'env.A must be a string');
    refusesInput({ image: 'x', egress: 'allow', ports: ['http'] }, 'ports', 'not a port mapping');
    refusesInput({ image: 'x', egress: 'allow', ports: ['0'] }, 'not a port mapping');
    refusesInput({ image: 'x', volumes: ['work'] }, 'volumes[0]', 'absolute');
    refusesInput({ image: 'x', volumes: ['/a/../b'] }, "must not contain '..'");
    refusesInput({ image: 'x', volumes: ['/'] }, 'cannot be mounted at /');
    refusesInput({ image: 'x', volumes: ['/w', '/w/'] }, '/w is listed twice');
    refusesInput({ image: 'x', volumes: [5] }, 'volumes[0] must be a string');
    refusesInput({ image: 'x', volumes: '/work' }, 'volumes must be a list');
    refusesInput(
      { image: 'x', env: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`V${i}`, ''])) },
      'more than 256',
    );
  });
});
