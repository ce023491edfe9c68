// biome-ignore-all lint/suspicious/noTemplateCurlyInString: compose interpolation text is what these tests feed in
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parses, refuses, service } from './testing.ts';

describe('compose loading', () => {
  it('refuses bad YAML with the line', () => {
    const msg = refuses('services:\n  a:\n    image: redis\n   bad: [\n', 'compose: invalid YAML: ', 'line');
    assert.match(msg, /line \d+, column \d+/);
  });

  it('refuses duplicate keys, several documents, unknown tags and unresolved aliases', () => {
    refuses('services:\n  a: {image: redis}\n  a: {image: nginx}\n', 'invalid YAML', 'unique');
    refuses('services:\n  a: {image: redis}\n---\nservices: {}\n', 'invalid YAML', 'multiple documents');
    refuses('services:\n  a:\n    image: !reset redis\n', 'invalid YAML', '!reset');
    refuses('services:\n  a:\n    image: *nothing\n', 'invalid YAML', 'nothing');
    refuses('services:\n  a:\n    <<: *nothing\n', 'invalid YAML');
    refuses('services:\n  a:\n    environment:\n      ? [x]\n      : y\n    image: redis\n', 'not a scalar');
  });

  it('refuses an empty file, a non-mapping top level and a file over 1 MiB', () => {
    refuses('', 'empty');
    refuses('# only a comment\n', 'empty');
    refuses('- a\n- b\n', 'top level');
    refuses('just text', 'top level');
    refuses(`services:\n  a: {image: redis}\n# ${'x'.repeat(1024 * 1024)}\n`, '1 MiB');
  });

  it('refuses NUL characters in values', () => {
    refuses('services:\n  a:\n    image: redis\n    command: "a\\0b"\n', 'services.a.command contains a NUL');
  });

  it('refuses text that is not a string', () => {
    refuses(undefined as unknown as string, 'must be text');
    refuses(Buffer.from('services: {}') as unknown as string, 'must be text');
  });

  it('resolves anchors and merge keys, including lists of merges', () => {
    const text = `
x-base: &base
  image: redis:7
  environment: {A: "1", B: "2"}
x-more: &more
  user: "1000:1000"
services:
  one:
    <<: [*base, *more]
    environment: {A: override}
  two:
    <<: *base
`;
    const { spec } = parses(text);
    assert.deepEqual(spec.services[0].env, { A: 'override' });
    assert.equal(spec.services[0].user, '1000:1000');
    assert.deepEqual(spec.services[1].env, { A: '1', B: '2' });
    assert.equal(spec.services[1].image, 'redis:7');
  });

  it('keeps file order, even for numeric service names', () => {
    const { spec } = parses(
      'services:\n  zeta: {image: a}\n  "10": {image: b}\n  alpha: {image: c}\n  2: {image: d}\n',
    );
    assert.deepEqual(
      spec.services.map((s) => s.name),
      ['zeta', '10', 'alpha', '2'],
    );
  });

  it('treats __proto__ and constructor as ordinary names', () => {
    const svc = service(
      'services:\n  a:\n    image: redis\n    environment:\n      __proto__: x\n      constructor: y\n',
    );
    assert.equal(Object.getOwnPropertyDescriptor(svc.env, '__proto__')?.value, 'x');
    assert.equal(svc.env.constructor, 'y');
    assert.equal(Object.getPrototypeOf(svc.env), Object.prototype);
    refuses(
      'services:\n  a: {image: redis}\nvolumes:\n  constructor: {}\nx: 1\n',
      "unknown top-level key 'x'",
    );
  });
});

describe('compose interpolation', () => {
  const env = { TAG: '7', EMPTY: '', NAME: 'db', PORT: '5432' };
  const value = (expr: string, vars: Record<string, string> = env) =>
    service(`services:\n  a:\n    image: redis\n    environment:\n      V: '${expr}'\n`, 'a', vars).env.V;

  it('substitutes ${VAR} and $VAR', () => {
    assert.equal(value('${TAG}'), '7');
    assert.equal(value('$TAG-x'), '7-x');
    assert.equal(value('a${NAME}b$PORT'), 'adbb5432');
  });

  it('applies :- and - defaults', () => {
    assert.equal(value('${MISSING:-def}'), 'def');
    assert.equal(value('${EMPTY:-def}'), 'def');
    assert.equal(value('${EMPTY-def}'), '');
    assert.equal(value('${MISSING-def}'), 'def');
    assert.equal(value('${TAG:-def}'), '7');
    assert.equal(value('${MISSING:-}'), '');
  });

  it('applies :+ and + replacements', () => {
    assert.equal(value('${TAG:+set}'), 'set');
    assert.equal(value('${EMPTY:+set}'), '');
    assert.equal(value('${EMPTY+set}'), 'set');
    assert.equal(value('${MISSING+set}'), '');
  });

  it('interpolates nested defaults', () => {
    assert.equal(value('${MISSING:-${NAME}-x}'), 'db-x');
    assert.equal(value('${MISSING:-${ALSO:-deep}}'), 'deep');
    assert.equal(value('${MISSING:-$PORT/data}'), '5432/data');
    assert.equal(value('${MISSING:-{"json":1}}'), '{"json":1}');
  });

  it('turns $$ into a literal $ and keeps a $ that starts no variable', () => {
    assert.equal(value('$$HOME and $${X}'), '$HOME and ${X}');
    assert.equal(value('costs 5$'), 'costs 5$');
    assert.equal(value('$1 $-'), '$1 $-');
  });

  it('refuses required variables that are missing, with the given text', () => {
    const msg = refuses(
      'services:\n  a:\n    image: redis\n    environment:\n      V: ${DB_PASS:?set the db password}\n',
      'required variable DB_PASS is missing a value: set the db password',
    );
    assert.match(msg, /services\.a\.environment\.V/);
    refuses('services:\n  a:\n    image: "redis:${TAG?}"\n', 'required variable TAG');
    assert.equal(value('${EMPTY?err}'), '');
    assert.throws(() => value('${EMPTY:?err}'), /EMPTY is missing a value: err/);
  });

  it('refuses malformed braces', () => {
    refuses(
      "services:\n  a:\n    image: redis\n    command: 'echo ${unclosed'\n",
      'invalid interpolation',
      'closing',
    );
    refuses(
      "services:\n  a:\n    image: redis\n    command: 'echo ${1abc}'\n",
      'invalid interpolation',
      '${1abc}',
    );
    refuses("services:\n  a:\n    image: redis\n    command: 'echo ${A/b/c}'\n", 'invalid interpolation');
  });

  it('warns once about unset variables and substitutes empty strings', () => {
    const { spec, warnings } = parses(
      'services:\n  a:\n    image: redis\n    environment:\n      - X=$NOPE\n      - Y=${NOPE}\n      - Z=${ALSO_NOPE}\n',
    );
    assert.deepEqual(spec.services[0].env, { X: '', Y: '', Z: '' });
    assert.ok(warnings.includes('variables not set, replaced by an empty string: ALSO_NOPE, NOPE'));
  });

  it('never reads the server process environment', () => {
    process.env.SVC_COMPOSE_TEST_SECRET = 'leak';
    try {
      assert.equal(value('${SVC_COMPOSE_TEST_SECRET}', {}), '');
      assert.equal(value('$PATH', {}), '');
    } finally {
      delete process.env.SVC_COMPOSE_TEST_SECRET;
    }
  });

  it('interpolates every string value, not keys, and leaves numbers alone', () => {
    const svc = service(
      'services:\n  a:\n    image: "redis:${TAG}"\n    ports: ["${PORT}:${PORT}"]\n    environment:\n' +
        '      $NAME: $NAME\n      N: 1.50\n    healthcheck:\n      test: [CMD, echo, $NAME]\n      retries: ${TAG}\n',
      'a',
      env,
    );
    assert.equal(svc.image, 'redis:7');
    assert.deepEqual(svc.ports, ['5432:5432']);
    assert.deepEqual(svc.env, { $NAME: 'db', N: '1.5' });
    assert.deepEqual(svc.health?.test, ['CMD', 'echo', 'db']);
    assert.equal(svc.health?.retries, 7);
  });
});
