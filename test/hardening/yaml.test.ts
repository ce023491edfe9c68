// H2 (issue 9): a YAML mapping with many keys parsed in quadratic time (the yaml package's
// uniqueKeys check compares each key with every earlier one): 80k keys in 950 kB froze the
// process 50 s, 36k services 15 s before the 500-service refusal. Duplicate keys are still
// refused, in linear time, and a mapping's key count is bounded. Each parse runs in a worker
// terminated at the bound, so a regression fails here instead of hanging the run.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseCompose } from '../../server/compose/index.ts';
import { bounded } from './support/bounded.ts';

const BOUND_MS = 20_000;

async function refusal(text: string): Promise<string> {
  const r = await bounded('compose', text, BOUND_MS);
  assert.equal(r.ok, false, 'accepted');
  assert.equal(r.name, 'ComposeError', r.message);
  return r.message;
}

describe('H2: YAML parse time stays near linear', () => {
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
