// Fuzzing compose text: 700 generated hostile files straight to the parser (alias bombs,
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
import { hostileCompose as hostile } from './support/compose-gen.ts';
import { runs } from './support/fuzz.ts';
import { rowCounts } from './support/state.ts';

const CORPUS = '/work/shared/corpus/compose';
const corpus = readdirSync(CORPUS)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => readFileSync(join(CORPUS, f), 'utf8'));

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

describe('hostile compose text', () => {
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
