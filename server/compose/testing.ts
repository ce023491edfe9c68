// Shared by the compose tests: refusal assertions and a structural check of a produced EnvSpec.
import assert from 'node:assert/strict';
import type { EnvSpec, ServiceRecord } from '../../protocol/spec.ts';
import { ComposeError, parseCompose } from './index.ts';

/** Asserts `run` throws a ComposeError whose message starts `compose: ` and contains every phrase. */
export function assertRefused(run: () => unknown, ...phrases: string[]): string {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof ComposeError, `expected a ComposeError, got ${(err as Error)?.stack ?? err}`);
    assert.ok(err.message.startsWith('compose: '), err.message);
    for (const phrase of phrases) {
      assert.ok(err.message.includes(phrase), `'${phrase}' not in: ${err.message}`);
    }
    return err.message;
  }
  return assert.fail(`expected a refusal containing ${phrases.join(', ')}`);
}

export function refuses(text: string, ...phrases: string[]): string {
  return assertRefused(() => parseCompose(text), ...phrases);
}

/** Parses and checks the spec's shape; returns it with the warnings. */
export function parses(text: string, env?: Record<string, string>): { spec: EnvSpec; warnings: string[] } {
  const result = parseCompose(text, env ? { env } : {});
  assertValidSpec(result.spec);
  return result;
}

/** The one (or named) service of a compose text. */
export function service(text: string, name?: string, env?: Record<string, string>): ServiceRecord {
  const { spec } = parses(text, env);
  const svc = name ? spec.services.find((s) => s.name === name) : spec.services[0];
  assert.ok(svc, `no service ${name}`);
  return svc;
}

/** A service record with nothing but a name and an image: what every unset field defaults to. */
export function bareService(name: string, image: string): ServiceRecord {
  return {
    name,
    image,
    env: {},
    ports: [],
    volumes: [],
    health: null,
    depends_on: {},
    command: null,
    entrypoint: null,
    user: '',
    working_dir: '',
    resources: { memory_mb: 0, pids: 0, cpus: 0 },
  };
}

const PORT = /^(?:\d+(?:-\d+)?:)?\d+(?:-\d+)?(?:\/(?:udp|sctp))?$/;
const DURATION = /^$|^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d))+$/;

export function assertValidSpec(spec: EnvSpec): void {
  assert.ok(spec.services.length > 0, 'no services');
  assert.ok(spec.egress === 'deny' || spec.egress === 'allow');
  const names = new Set(spec.services.map((s) => s.name));
  assert.equal(names.size, spec.services.length, 'service names are unique');
  assert.equal(new Set(spec.volumes).size, spec.volumes.length, 'volume names are unique');
  for (const s of spec.services) {
    assert.match(s.name, /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/);
    assert.ok(s.image.length > 0, `${s.name}: image`);
    for (const [k, v] of Object.entries(s.env)) {
      assert.equal(typeof v, 'string', `${s.name}: env ${k}`);
    }
    for (const p of s.ports) {
      assert.match(p, PORT);
    }
    for (const v of s.volumes) {
      const [volume, path, mode] = v.split(':');
      assert.ok(spec.volumes.includes(volume), `${s.name}: volume ${volume} listed`);
      assert.ok(path.startsWith('/'), `${s.name}: ${v}`);
      assert.ok(mode === undefined || mode === 'ro', `${s.name}: ${v}`);
    }
    for (const dep of Object.keys(s.depends_on)) {
      assert.ok(names.has(dep), `${s.name} depends on ${dep}`);
    }
    if (s.health) {
      assert.ok(
        ['CMD', 'CMD-SHELL', 'NONE'].includes(s.health.test[0]),
        `${s.name}: health ${s.health.test}`,
      );
      assert.match(s.health.interval, DURATION);
    }
    for (const r of [s.resources.memory_mb, s.resources.cpus, s.resources.pids]) {
      assert.ok(r >= 0);
    }
  }
  if (spec.agent) {
    assert.ok(names.has(spec.agent.service));
  }
  if (spec.verifier) {
    assert.ok((spec.verifier.image === undefined) !== (spec.verifier.service === undefined));
    assert.ok(spec.verifier.timeout_sec > 0);
  }
}
