// biome-ignore-all lint/suspicious/noTemplateCurlyInString: compose interpolation text is what these tests feed in
// Property-style robustness: whatever text arrives, the parser answers with a valid EnvSpec or a
// ComposeError starting `compose: `, never another exception. Inputs come from a seeded generator,
// so a failure names a seed and case that reproduce it.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { corpusPath } from '../../test/support/corpus.ts';
import { ComposeError, type ImageSandboxInput, imageSandboxSpec, parseCompose } from './index.ts';
import { assertValidSpec } from './testing.ts';

const COMPOSE_DIR = corpusPath('compose');
const corpus = readdirSync(COMPOSE_DIR)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => ({ name: f, text: readFileSync(join(COMPOSE_DIR, f), 'utf8') }));

/** mulberry32: small, seeded, good enough to spread inputs. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** True when the text parsed (to a valid spec), false when refused; anything else fails. */
function check(text: unknown, label: string, env?: Record<string, string>): boolean {
  try {
    assertValidSpec(parseCompose(text as string, env ? { env } : {}).spec);
    return true;
  } catch (err) {
    if (err instanceof ComposeError && err.message.startsWith('compose: ')) {
      return false;
    }
    return assert.fail(`${label}: ${err instanceof Error ? err.stack : String(err)}`);
  }
}

// biome-ignore format: token list
const TOKENS = [
  ':', ': ', '- ', '\n', '\n  ', '\n    ', '[', ']', '{', '}', ',', '&a ', '*a', '<<: *a', '${', '$', '}', '$$', '${X:-',
  '${X:?', '!tag ', '!!binary ', '"', "'", '#', '\t', '|', '>', '? ', '---\n', '...', 'null', '~', 'true', '0x1F', '.inf',
  '1e400', 'image', 'services', 'volumes', 'ports', 'x-svc.agent.service', 'healthcheck', 'test', 'CMD', 'user', '\0',
  '\uFEFF', '\u2028', 'é', '🙂', '/', './x:/y', 'depends_on', 'environment', '80:80', 'deploy', '<<',
];

describe('compose robustness', () => {
  it('every truncation of every corpus file', () => {
    for (const { name, text } of corpus) {
      const step = Math.max(1, Math.floor(text.length / 60));
      for (let end = 0; end <= text.length; end += step) {
        check(text.slice(0, end), `${name} cut at ${end}`);
      }
      const lines = text.split('\n');
      const lineStep = Math.max(1, Math.floor(lines.length / 40));
      for (let n = 0; n <= lines.length; n += lineStep) {
        check(lines.slice(0, n).join('\n'), `${name} to line ${n}`);
      }
    }
  });

  it('random mutations of corpus files', () => {
    const next = rng(1);
    for (let i = 0; i < 1500; i++) {
      const { name, text } = corpus[Math.floor(next() * corpus.length)];
      let mutated = text;
      const edits = 1 + Math.floor(next() * 6);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(next() * (mutated.length + 1));
        const cut = next() < 0.5 ? Math.floor(next() * 20) : 0;
        const insert = next() < 0.7 ? TOKENS[Math.floor(next() * TOKENS.length)] : '';
        mutated = mutated.slice(0, at) + insert + mutated.slice(at + cut);
      }
      check(mutated, `seed 1 case ${i} (${name})`);
    }
  });

  it('random bytes and random token soup', () => {
    const next = rng(2);
    for (let i = 0; i < 800; i++) {
      const bytes = Buffer.from(
        Array.from({ length: Math.floor(next() * 400) }, () => Math.floor(next() * 256)),
      );
      check(bytes.toString('utf8'), `seed 2 bytes ${i}`);
      check(bytes.toString('latin1'), `seed 2 latin1 ${i}`);
      const soup = Array.from(
        { length: Math.floor(next() * 60) },
        () => TOKENS[Math.floor(next() * TOKENS.length)],
      ).join('');
      check(`services:\n  a:\n    ${soup}`, `seed 2 soup ${i}`);
      check(soup, `seed 2 bare soup ${i}`);
    }
  });

  it('randomly shaped compose documents', () => {
    const next = rng(3);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
    // biome-ignore format: vocabulary
    const keys = [
      'image', 'build', 'command', 'entrypoint', 'environment', 'ports', 'volumes', 'healthcheck', 'depends_on',
      'user', 'working_dir', 'deploy', 'mem_limit', 'cpus', 'pids_limit', 'profiles', 'secrets', 'restart',
      'network_mode', 'privileged', 'test', 'interval', 'retries', 'condition', 'target', 'published', 'type',
      'source', 'resources', 'limits', 'memory', 'service', 'collect', 'timeout_sec', 'external', 'driver_opts',
    ];
    const scalars = [
      null,
      true,
      false,
      0,
      -1,
      1.5,
      1e300,
      'redis',
      '',
      '/data',
      'a:/b',
      '80:80',
      'CMD',
      '1g',
      '${X}',
      '$$',
    ];
    const value = (depth: number): unknown => {
      const r = next();
      if (depth > 3 || r < 0.45) {
        return pick(scalars);
      }
      if (r < 0.7) {
        return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
      }
      return Object.fromEntries(
        Array.from({ length: Math.floor(next() * 5) }, () => [pick(keys), value(depth + 1)]),
      );
    };
    let parsed = 0;
    for (let i = 0; i < 1500; i++) {
      const services = Object.fromEntries(
        Array.from({ length: 1 + Math.floor(next() * 3) }, (_, n) => [
          `s${n}`,
          { image: 'redis', ...(value(0) as object) },
        ]),
      );
      const doc: Record<string, unknown> = { services };
      if (next() < 0.3) {
        doc.volumes = { data: value(2) };
      }
      if (next() < 0.3) {
        doc['x-svc'] = { agent: { service: pick(['s0', 's1', 'zz']) }, verifier: value(1), egress: value(3) };
      }
      if (check(stringify(doc), `seed 3 doc ${i}`, { X: 'x' })) {
        parsed++;
      }
    }
    // The generator must reach the accepting paths too, not only refusals.
    assert.ok(parsed > 50, `only ${parsed} of 1500 parsed`);
  });

  it('deeply nested YAML in every shape', () => {
    for (const depth of [10, 63, 65, 200, 2000, 50_000]) {
      check(
        `services:\n  a:\n    image: x\n    labels: ${'['.repeat(depth)}${']'.repeat(depth)}\n`,
        `flow seq ${depth}`,
      );
      check(`${'{a: '.repeat(depth)}1${'}'.repeat(depth)}`, `flow map ${depth}`);
      if (depth <= 2000) {
        const block = Array.from({ length: depth }, (_, i) => `${' '.repeat(i)}k:`).join('\n');
        check(
          `services:\n a:\n  image: x\n  x-deep:\n${block.replace(/^/gm, '   ')} 1\n`,
          `block map ${depth}`,
        );
        check(
          `services:\n  a:\n    image: x\n    environment: ${'['.repeat(depth)}${']'.repeat(depth)}\n`,
          `env ${depth}`,
        );
      }
      check(
        `services:\n  a:\n    image: x\n    command: "${'${A:-'.repeat(depth)}x${'}'.repeat(depth)}"\n`,
        `interp ${depth}`,
      );
    }
  });

  it('alias bombs are refused, quickly', () => {
    const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (const c of 'bcdefghi') {
      const prev = String.fromCharCode(c.charCodeAt(0) - 1);
      laughs.push(`${c}: &${c} [${Array(9).fill(`*${prev}`).join(',')}]`);
    }
    const bomb = `${laughs.join('\n')}\nservices:\n  s:\n    image: x\n    command: *i\n`;
    assert.throws(() => parseCompose(bomb), ComposeError);
    const wide = `x: &x [${Array(20_000).fill('y').join(',')}]\nservices:\n  s:\n    image: x\n    labels: [${Array(2_000).fill('*x').join(',')}]\n`;
    assert.throws(() => parseCompose(wide), ComposeError);
    const merges = ['x0: &x0 {k: v}'];
    for (let i = 1; i < 30; i++) {
      merges.push(`x${i}: &x${i}\n  <<: [*x${i - 1}, *x${i - 1}]\n  k${i}: [*x${i - 1}, *x${i - 1}]`);
    }
    check(`${merges.join('\n')}\nservices:\n  s:\n    image: x\n    environment: *x29\n`, 'merge bomb');
  });

  it('random interpolation text', () => {
    const next = rng(4);
    const alphabet = [
      '$',
      '{',
      '}',
      ':',
      '-',
      '?',
      '+',
      'A',
      'B',
      '_',
      '1',
      ' ',
      '$$',
      '${A',
      '${B:-',
      '${C:?',
    ];
    for (let i = 0; i < 3000; i++) {
      const text = Array.from(
        { length: Math.floor(next() * 30) },
        () => alphabet[Math.floor(next() * alphabet.length)],
      ).join('');
      check(`services:\n  a:\n    image: x\n    command: ${JSON.stringify(text)}\n`, `seed 4 case ${i}`, {
        A: 'a',
        B: '',
      });
    }
  });

  it('the image sandbox form with random input', () => {
    const next = rng(5);
    const any = [
      null,
      undefined,
      1,
      'x',
      '',
      '/work',
      '8080',
      ['/a'],
      ['80'],
      { a: 'b' },
      { a: 1 },
      [1],
      'allow',
      'deny',
    ];
    for (let i = 0; i < 2000; i++) {
      const input: Record<string, unknown> = {};
      for (const key of ['image', 'cmd', 'env', 'ports', 'volumes', 'egress']) {
        if (next() < 0.6) {
          input[key] = any[Math.floor(next() * any.length)];
        }
      }
      try {
        assertValidSpec(imageSandboxSpec(input as unknown as ImageSandboxInput));
      } catch (err) {
        if (!(err instanceof ComposeError && err.message.startsWith('compose: '))) {
          assert.fail(`seed 5 case ${i} ${JSON.stringify(input)}: ${(err as Error).stack}`);
        }
      }
    }
  });
});
