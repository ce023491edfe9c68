// The one wording of schema refusals, checked on the validator Fastify is given: each refusal names
// the first field that failed and what it should have been.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Type } from '@sinclair/typebox';
import { Body, StringEnum } from '../../protocol/api/kit.ts';
import { describeValidation, isEmail, validatorCompiler } from './validation.ts';

const Sample = Body({
  kind: StringEnum(['a', 'b'] as const),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 3 })),
  cmd: Type.Optional(Type.Array(Type.String(), { maxItems: 2 })),
  email: Type.Optional(Type.String({ format: 'email' })),
  n: Type.Optional(Type.Integer({ minimum: 1, maximum: 5 })),
  egress: Type.Optional(Type.Union([Type.Literal('deny'), Type.Literal('allow')])),
});

function refusal(value: unknown): string | undefined {
  const check = validatorCompiler({ schema: Sample, method: 'POST', url: '/x', httpPart: 'body' });
  const out = check(value) as { error?: Parameters<typeof describeValidation>[0] };
  return out.error ? describeValidation(out.error, 'body') : undefined;
}

test('a valid body passes unchanged (no coercion, no defaults)', () => {
  const check = validatorCompiler({ schema: Sample, method: 'POST', url: '/x', httpPart: 'body' });
  const body = { kind: 'a', n: 2 };
  assert.deepEqual(check(body), { value: body });
  assert.equal(refusal({ kind: 'a', n: '2' }), 'body.n must be integer');
});

test('each refusal names the field and what it should have been', () => {
  const cases: Array<[unknown, string]> = [
    [null, 'body must be object'],
    [{}, 'body.kind is required'],
    [{ kind: 'c' }, 'body.kind must be one of a, b'],
    [{ kind: 'a', bogus: 1 }, "body has an unknown field 'bogus'"],
    [{ kind: 'a', name: '' }, 'body.name must NOT have fewer than 1 characters'],
    [{ kind: 'a', name: 'abcd' }, 'body.name must NOT have more than 3 characters'],
    [{ kind: 'a', cmd: ['x', 1] }, 'body.cmd[1] must be string'],
    [{ kind: 'a', cmd: ['x', 'y', 'z'] }, 'body.cmd must NOT have more than 2 items'],
    [{ kind: 'a', email: 'nope' }, 'body.email must match format "email"'],
    [{ kind: 'a', n: 0 }, 'body.n must be >= 1'],
    [{ kind: 'a', n: 6 }, 'body.n must be <= 5'],
    [{ kind: 'a', egress: 'open' }, 'body.egress must be one of deny, allow'],
  ];
  for (const [value, message] of cases) assert.equal(refusal(value), message, JSON.stringify(value));
});

test('email: the ajv-formats shape, by scanning', () => {
  for (const ok of ['a@example.com', 'first.last+tag@sub.example.org', "o'brien@x.io"])
    assert.ok(isEmail(ok), ok);
  for (const bad of ['', 'a', '@x.io', 'a@', 'a@x', 'a@@x.io', 'a..b@x.io', 'a@-x.io', 'a@x-.io', 'a b@x.io'])
    assert.equal(isEmail(bad), false, bad);
});
