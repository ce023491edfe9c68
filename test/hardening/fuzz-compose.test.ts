// R2 (issue 9), compose text: 700 generated hostile files straight to the parser (alias bombs,
// deep nesting, huge strings, every refused key, mutated real-world files, arbitrary text), and
// 150 of them through POST /v1/projects/{p}/deploy. The parser answers a valid spec or a
// `compose: ` refusal, never another exception; the hostile kinds are always refused; the API
// answers 400 and changes nothing; time and memory stay bounded (the whole run is in a worker
// terminated at a bound, see test/hardening/yaml.test.ts for the per-file bounds).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ComposeError, parseCompose } from '../../server/compose/index.ts';
import { assertValidSpec } from '../../server/compose/testing.ts';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { createProject } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { runs } from './support/fuzz.ts';
import { rowCounts } from './support/state.ts';

const CORPUS = '/work/shared/corpus/compose';
const corpus = readdirSync(CORPUS)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => readFileSync(join(CORPUS, f), 'utf8'));

const svc = (extra: string) => `services:\n  app:\n    image: redis:7\n${extra}`;

const aliasBomb = fc
  .record({ levels: fc.integer({ min: 3, max: 14 }), width: fc.integer({ min: 2, max: 24 }) })
  .map(({ levels, width }) => {
    let s = `x-a0: &a0 [${Array(width).fill('"lol"').join(',')}]\n`;
    for (let i = 1; i <= levels; i++)
      s += `x-a${i}: &a${i} [${Array(width)
        .fill(`*a${i - 1}`)
        .join(',')}]\n`;
    return `${s}services:\n  app:\n    image: redis:7\n    command: *a${levels}\n`;
  });

const deepNesting = fc
  .record({ depth: fc.integer({ min: 65, max: 20_000 }), flow: fc.boolean() })
  // Block nesting indents every level, so its text grows with the square of the depth.
  .map(({ depth, flow }) => ({ flow, depth: flow ? depth : 65 + (depth % 1300) }))
  .map(({ depth, flow }) =>
    flow
      ? svc(`    labels: {k: ${'['.repeat(depth)}${']'.repeat(depth)}}\n`)
      : `services:\n  app:\n    image: redis:7\n    x-deep:\n${Array.from({ length: depth }, (_, i) => `${' '.repeat(6 + i)}k:`).join('\n')} 1\n`,
  );

/** Over the 1 MiB limit anywhere, or just under it in a field that must refuse it. */
const hugeString = fc.oneof(
  fc
    .record({
      size: fc.integer({ min: 1024 * 1024 + 1, max: 1200 * 1024 }),
      key: fc.constantFrom('entrypoint', 'command'),
    })
    .map(({ size, key }) => svc(`    ${key}: "${'9'.repeat(size)}"\n`)),
  fc
    .record({
      size: fc.integer({ min: 1000, max: 1000 * 1024 }),
      key: fc.constantFrom('cpus', 'mem_limit', 'pids_limit', 'ports', 'image'),
    })
    .map(({ size, key }) => svc(`    ${key}: "${'9'.repeat(size)}x"\n`)),
);

/** Every host-access refusal of the parser (spec "Isolation guarantees"; refusals.ts). */
const REFUSED = [
  '    privileged: true\n',
  '    cap_add: [SYS_ADMIN]\n',
  '    devices: ["/dev/sda:/dev/sda"]\n',
  '    device_cgroup_rules: ["a *:* rwm"]\n',
  '    gpus: all\n',
  '    network_mode: host\n',
  '    network_mode: "container:other"\n',
  '    pid: host\n',
  '    ipc: host\n',
  '    uts: host\n',
  '    userns_mode: host\n',
  '    cgroup: host\n',
  '    extends: {service: base}\n',
  '    volumes_from: [other]\n',
  '    use_api_socket: true\n',
  '    provider: {type: model}\n',
  '    volumes: ["/:/host"]\n',
  '    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n',
  '    volumes: [{type: bind, source: /etc, target: /etc}]\n',
  '    deploy: {resources: {reservations: {devices: [{capabilities: [gpu]}]}}}\n',
];
const refusedKey = fc.constantFrom(...REFUSED).map(svc);

const mutated = fc
  .record({
    file: fc.constantFrom(...corpus),
    edits: fc.array(fc.tuple(fc.nat(), fc.nat({ max: 40 }), fc.string({ maxLength: 12 })), {
      minLength: 1,
      maxLength: 6,
    }),
  })
  .map(({ file, edits }) => {
    let t = file;
    for (const [at, del, ins] of edits) {
      const i = at % (t.length + 1);
      t = t.slice(0, i) + ins + t.slice(i + del);
    }
    return t;
  });

const hostile = fc.oneof(aliasBomb, deepNesting, hugeString, refusedKey);
const anything = fc.oneof(
  hostile,
  mutated,
  fc.string({ maxLength: 400 }),
  fc.string({ unit: 'binary', maxLength: 400 }),
);

/** True when parsed to a valid spec, false when refused; any other outcome fails the property. */
function outcome(text: string): boolean {
  try {
    assertValidSpec(parseCompose(text).spec);
    return true;
  } catch (err) {
    if (err instanceof ComposeError && err.message.startsWith('compose: ')) return false;
    throw err;
  }
}

describe('R2: hostile compose text', () => {
  test('the hostile kinds are always refused (400 reasons), never another exception', () => {
    fc.assert(
      fc.property(hostile, (text) => {
        assert.equal(outcome(text), false);
      }),
      runs(400),
    );
  });

  test('any text: a valid spec or a refusal', () => {
    fc.assert(
      fc.property(anything, (text) => void outcome(text)),
      runs(300),
    );
  });

  describe('through the API', () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer('sqlite', {}, { limits: NO_RATE_LIMITS });
      await createProject(s, 'composefuzz');
    });
    after(() => s.close());

    test('150 hostile deploys: 400 each, nothing changes, the server stays up', async () => {
      const before = await rowCounts(s);
      const rss = process.memoryUsage().rss;
      await fc.assert(
        fc.asyncProperty(hostile, async (compose) => {
          const r = await s.req('POST', '/v1/projects/composefuzz/deploy', { body: { compose } });
          assert.ok(
            r.status === 400 || r.status === 413,
            `${r.status} ${JSON.stringify(r.body).slice(0, 200)}`,
          );
          assert.equal(typeof r.body.error, 'string');
        }),
        runs(150),
      );
      assert.deepEqual(await rowCounts(s), before);
      assert.ok(process.memoryUsage().rss - rss < 512 * 1024 * 1024, 'memory stayed bounded');
      assert.equal((await fetch(`${s.url}/health`)).status, 200);
    });
  });
});
