// Fuzzing tar archives wherever svc reads one: the control plane checks an upload's headers
// before any host sees it (PUT /v1/envs/{env}/files), and the CLI extracts what `files get`
// downloads. 600 generated hostile archives each (traversal, absolute and NUL names, links,
// devices, fifos, long-name and pax headers, lying sizes, truncation, garbage): the control plane
// answers a 4xx and changes nothing; the CLI writes only regular files and directories, only
// inside its target, or refuses with its own error.
import assert from 'node:assert/strict';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { CliError } from '../../cli/errors.ts';
import { extractSafely } from '../../cli/tarball.ts';
import { NO_RATE_LIMITS } from '../../server/http/limits.ts';
import { createProject } from '../support/api.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { runs } from './support/fuzz.ts';
import { rowCounts } from './support/state.ts';
import { hostileTar } from './support/tar-gen.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 600);

/** A hung request or extraction fails the property (with its input) instead of the whole run. */
function within<T>(p: Promise<T>, ms = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Every path under `dir`, as lstat sees it. */
function walk(dir: string, out: Array<[string, import('node:fs').Stats]> = []) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    out.push([p, st]);
    if (st.isDirectory()) walk(p, out);
  }
  return out;
}

describe('hostile tar archives', () => {
  let s: TestServer;
  let env: string;
  let scratch: string;
  before(async () => {
    s = await startTestServer('sqlite', {}, { limits: NO_RATE_LIMITS });
    env = (await createProject(s, 'tarfuzz')).environments[0].ID;
    scratch = mkdtempSync(join(tmpdir(), 'svc-tarfuzz-'));
  });
  after(async () => {
    await s.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  test(`control plane upload: ${RUNS} archives, each a 4xx that changes nothing`, async () => {
    const before = await rowCounts(s);
    const rss = process.memoryUsage().rss;
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(hostileTar, fc.constantFrom('/work', '/../x', 'rel'), async (data, path) => {
        const r = await within(
          s.req('PUT', `/v1/envs/${env}/files?service=main&path=${encodeURIComponent(path)}`, {
            raw: data,
            headers: { 'content-type': 'application/x-tar' },
          }),
        );
        seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
        assert.ok(r.status >= 400 && r.status < 500, `${r.status} ${JSON.stringify(r.body)}`);
        assert.equal(typeof r.body.error, 'string');
      }),
      runs(RUNS),
    );
    assert.deepEqual(await rowCounts(s), before);
    assert.ok(process.memoryUsage().rss - rss < 512 * 1024 * 1024, 'memory stayed bounded');
    assert.ok((seen.get(400) ?? 0) > RUNS / 4, `mostly refused as bad input: ${JSON.stringify([...seen])}`);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  });

  test(`CLI extraction: ${RUNS} archives write only plain files inside the target, or refuse`, async () => {
    let n = 0;
    const outcomes = { extracted: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(hostileTar, async (data) => {
        const root = join(scratch, String(n++));
        mkdirSync(root);
        const out = join(root, 'out');
        try {
          await within(extractSafely(data, out));
          outcomes.extracted++;
        } catch (err) {
          assert.ok(err instanceof CliError, String((err as Error).stack));
          outcomes.refused++;
        }
        assert.deepEqual(
          readdirSync(root).filter((x) => x !== 'out'),
          [],
          'nothing beside the target',
        );
        for (const [p, st] of walk(root)) {
          assert.ok(st.isFile() || st.isDirectory(), `${p} is neither a file nor a directory`);
        }
        rmSync(root, { recursive: true, force: true });
      }),
      runs(RUNS),
    );
    assert.ok(outcomes.refused > 0 && outcomes.extracted > 0, JSON.stringify(outcomes));
  });
});
