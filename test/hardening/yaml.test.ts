// A YAML mapping with many keys parsed in quadratic time (the yaml package's
// uniqueKeys check compares each key with every earlier one): 80k keys in 950 kB froze the
// process 50 s, 36k services 15 s before the 500-service refusal. Duplicate keys are still
// refused, in linear time, and a mapping's key count is bounded. Each parse runs in a worker
// terminated at the bound, so a regression fails here instead of hanging the run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCompose } from '../../server/compose/index.ts';
import { createProject } from '../support/api.ts';
import { startTestServer } from '../support/server.ts';
import { bounded } from './support/bounded.ts';

const BOUND_MS = 20_000;

async function refusal(text: string): Promise<string> {
  const r = await bounded('compose', text, BOUND_MS);
  assert.equal(r.ok, false, 'accepted');
  assert.equal(r.name, 'ComposeError', r.message);
  return r.message;
}

describe('YAML parse time stays near linear', () => {
  it('80k keys in one mapping are refused by count, not after a quadratic parse', async () => {
    let env = '';
    for (let i = 0; env.length < 950_000; i++) env += `      K${i}: v\n`;
    const msg = await refusal(`services:\n  app:\n    image: redis:7\n    environment:\n${env}`);
    assert.match(msg, /more than 20000 lines and flow items/);
  });

  it('a mapping of 15k keys (under the line bound) is refused by its key count', async () => {
    let env = '';
    for (let i = 0; i < 15_000; i++) env += `      K${i}: v\n`;
    const msg = await refusal(`services:\n  app:\n    image: redis:7\n    environment:\n${env}`);
    assert.match(msg, /a mapping has more than 10000 keys/);
  });

  it('36k services are refused by count', async () => {
    let s = 'services:\n';
    for (let i = 0; i < 36_000; i++) s += `  s${i}: {}\n`;
    assert.match(await refusal(s), /more than 20000 lines and flow items/);
  });

  it('80k keys as a flow mapping, too', async () => {
    const keys = Array.from({ length: 80_000 }, (_, i) => `k${i}: 1`).join(', ');
    assert.match(
      await refusal(`x-big: {${keys}}\nservices: {a: {image: redis}}\n`),
      /more than 20000 lines and flow items/,
    );
  });

  it('a megabyte of flow nesting is refused before the YAML parser recurses through it', async () => {
    const d = 500_000;
    const msg = await refusal(`services: {a: {image: redis, labels: {k: ${'['.repeat(d)}${']'.repeat(d)}}}}`);
    assert.match(msg, /nested deeper than 64 levels/);
    // An apostrophe in a plain scalar does not hide what follows.
    const hidden = await refusal(`x-a: it's ${'{a: '.repeat(200_000)}1\nservices: {}\n`);
    assert.match(hidden, /nested deeper than 64 levels/);
  });

  it('a duplicate key is still refused, wherever it is', async () => {
    assert.match(
      await refusal('services:\n  a:\n    image: redis\n    image: nginx\n'),
      /invalid YAML: map keys must be unique; 'image' appears twice/,
    );
    let env = '';
    for (let i = 0; i < 9_000; i++) env += `      K${i}: v\n`;
    const msg = await refusal(
      `services:\n  app:\n    image: redis:7\n    environment:\n${env}      K5: again\n`,
    );
    assert.match(msg, /'K5' appears twice/);
  });

  it('repeated merge keys and equal-looking keys of different types are not duplicates', () => {
    const text = [
      'x-a: &a {image: redis}',
      'x-b: &b {user: "1:1"}',
      'services:',
      '  app:',
      '    <<: *a',
      '    <<: *b',
      '    labels:',
      '      "1": a',
      '      1.5: b',
      '',
    ].join('\n');
    const { spec } = parseCompose(text);
    assert.equal(spec.services[0].image, 'redis');
    assert.equal(spec.services[0].user, '1:1');
  });
});

// A compose file broken by lone CRs was one line to the yaml package, and its pretty errors
// scanned that line once per error: a 529 kB file held the event loop 87 s and dropped other
// teams' host streams. Other inputs made the parser's own work superlinear: many nodes on one
// line, and aliases (each resolved by scanning every anchor before it).
describe('YAML line breaks and parser work are bounded', () => {
  const services = (n: number, br: string) =>
    `services:${br}${Array.from({ length: n }, (_, i) => `  s${i}: {image: busybox}${br}`).join('')}`;

  it('a file broken by lone CRs or CR LF parses exactly like its LF twin', () => {
    const lf =
      'x-a: &a {image: redis}\nservices:\n  app:\n    <<: *a\n    command: ["sh", "-c",\n      "echo hi"]\n';
    const want = parseCompose(lf).spec;
    assert.deepEqual(parseCompose(lf.replaceAll('\n', '\r')).spec, want);
    assert.deepEqual(parseCompose(lf.replaceAll('\n', '\r\n')).spec, want);
  });

  it("the finding's 529 kB CR file is refused by its line count", async () => {
    assert.match(await refusal(services(20_000, '\r')), /more than 20000 lines/);
  });

  it('many nodes on one line are refused by their token count', async () => {
    assert.match(await refusal(`x: ${'a: '.repeat(330_000)}`), /more than 150000 YAML tokens/);
    assert.match(await refusal(`x: ${'- '.repeat(490_000)}1`), /more than 150000 YAML tokens/);
  });

  it('many errors on one long line: the first is reported, with its place', async () => {
    assert.match(
      await refusal(`x: ${'a: '.repeat(25_000)}`),
      /invalid YAML: Nested mappings are not allowed in compact mappings at line 1, column 4$/,
    );
  });

  it('aliases cost a lookup each: an anchor holding 2,000 aliases, after 9,000 nodes', async () => {
    const nodes = Array.from({ length: 9_000 }, (_, i) => `x-${i}: v`).join('\n');
    const text = `x-v: &v 1\n${nodes}\nx-a: &a [${Array(2_000).fill('*v').join(',')}]\nx-b: *a\nservices: {}\n`;
    assert.match(await refusal(text), /no services/);
    const anchors = Array.from({ length: 9_000 }, (_, i) => `x-${i}: &a${i} v`).join('\n');
    const late = `${anchors}\nx-l: [${Array.from({ length: 9_000 }, (_, i) => `*a${i}`).join(',')}]\nservices: {}\n`;
    assert.match(await refusal(late), /no services/);
  });

  it('an alias inside its own anchor, or before it, is refused', () => {
    assert.throws(
      () => parseCompose('x-a: &a [1, *a]\nservices: {}\n'),
      /alias \*a is inside its own anchor/,
    );
    assert.throws(() => parseCompose('x-a: *b\nx-b: &b 1\nservices: {}\n'), /unresolved alias/);
  });

  it('over HTTP: the CR file is a clear 400 and the server answers others alongside it', {
    timeout: 60_000,
  }, async () => {
    const s = await startTestServer('sqlite');
    try {
      await createProject(s, 'cr');
      const [deploy, health] = await Promise.all([
        s.req('POST', '/v1/projects/cr/deploy', { body: { compose: services(20_000, '\r') } }),
        s.req('GET', '/health', { token: false }),
      ]);
      assert.equal(deploy.status, 400);
      assert.match(deploy.body.error, /more than 20000 lines/);
      assert.equal(health.status, 200);
      const smaller = await s.req('POST', '/v1/projects/cr/deploy', {
        body: { compose: services(8_000, '\r') },
      });
      assert.equal(smaller.status, 400);
      assert.match(smaller.body.error, /8000 services declared; the limit is 500/);
      assert.equal((await s.req('GET', '/health', { token: false })).status, 200);
    } finally {
      await s.close();
    }
  });
});
