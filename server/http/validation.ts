// The one validator of requests (TypeBox's compiler, the same one that checks frames, payloads
// and answers) and the one wording of its refusals. A refusal names the first field that failed
// and what it should have been: `body.kind must be one of a, b`, `body.name is required`,
// `body has an unknown field 'x'`.
import { FormatRegistry, Kind, type TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify';
import type { App } from './app.ts';

/**
 * `a@b.c`: the shape ajv-formats accepted, checked by scanning (no regex on user input). The local
 * part is dot-separated atoms of the RFC 5322 atext characters; the domain at least two labels of
 * letters, digits and inner hyphens.
 */
export function isEmail(s: string): boolean {
  const at = s.indexOf('@');
  if (at <= 0 || at !== s.lastIndexOf('@')) return false;
  const atext = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+/=?^_`{|}~-";
  const local = s.slice(0, at).split('.');
  if (local.some((atom) => atom === '' || [...atom].some((c) => !atext.includes(c)))) return false;
  const labels = s.slice(at + 1).split('.');
  if (labels.length < 2) return false;
  const alnum = (c: string | undefined) => c !== undefined && /^[a-z0-9]$/i.test(c);
  return labels.every(
    (l) => alnum(l[0]) && alnum(l[l.length - 1]) && [...l].every((c) => c === '-' || alnum(c)),
  );
}

// The formats route schemas use; TypeBox refuses a string whose format it does not know.
if (!FormatRegistry.Has('email')) FormatRegistry.Set('email', isEmail);

/** A schema failure as Fastify carries it, with TypeBox's error kept for the wording below. */
interface SchemaFailure extends FastifySchemaValidationError {
  error: ValueError;
}

function failuresOf(check: TypeCheck<TSchema>, value: unknown): SchemaFailure[] {
  const error = check.Errors(value).First();
  if (!error) return [];
  return [
    {
      keyword: ValueErrorType[error.type] ?? 'invalid',
      instancePath: error.path,
      schemaPath: '',
      params: {},
      message: error.message,
      error,
    },
  ];
}

/** Fastify's validator for every route schema: the value as sent, never coerced or defaulted. */
export const validatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema }) => {
  const check = TypeCompiler.Compile(schema);
  return (value: unknown) => (check.Check(value) ? { value } : { error: failuresOf(check, value) });
};

/** A JSON pointer segment as the key it names. */
const fromPointer = (segment: string) => segment.replaceAll('~1', '/').replaceAll('~0', '~');

/** `/cmd/0` → `.cmd[0]`. */
function pathOf(path: string): string {
  return path
    .split('/')
    .filter(Boolean)
    .map(fromPointer)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('');
}

/** The values a schema allows, when it is an enum or a union of literals. */
function literalsOf(schema: TSchema): unknown[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum;
  if (schema[Kind] === 'Literal') return [schema.const];
  if (schema[Kind] !== 'Union') return undefined;
  const values = (schema.anyOf as TSchema[]).map((s) => (s[Kind] === 'Literal' ? s.const : undefined));
  return values.includes(undefined) ? undefined : values;
}

/** What the value should have been, worded like the refusals clients already know. */
function shouldBe(e: ValueError): string {
  const s = e.schema;
  switch (e.type) {
    case ValueErrorType.String:
    case ValueErrorType.Number:
    case ValueErrorType.Integer:
    case ValueErrorType.Boolean:
    case ValueErrorType.Object:
    case ValueErrorType.Array:
    case ValueErrorType.Null:
      return `must be ${ValueErrorType[e.type].toLowerCase()}`;
    case ValueErrorType.StringMinLength:
      return `must NOT have fewer than ${s.minLength} characters`;
    case ValueErrorType.StringMaxLength:
      return `must NOT have more than ${s.maxLength} characters`;
    case ValueErrorType.StringPattern:
      return `must match pattern "${s.pattern}"`;
    case ValueErrorType.StringFormat:
      return `must match format "${s.format}"`;
    case ValueErrorType.ArrayMinItems:
      return `must NOT have fewer than ${s.minItems} items`;
    case ValueErrorType.ArrayMaxItems:
      return `must NOT have more than ${s.maxItems} items`;
    case ValueErrorType.NumberMinimum:
    case ValueErrorType.IntegerMinimum:
      return `must be >= ${s.minimum}`;
    case ValueErrorType.NumberMaximum:
    case ValueErrorType.IntegerMaximum:
      return `must be <= ${s.maximum}`;
    case ValueErrorType.ObjectMaxProperties:
      return `must NOT have more than ${s.maxProperties} properties`;
  }
  const values = literalsOf(s);
  if (values) return `must be one of ${values.join(', ')}`;
  return e.message.replace(/^Expected/, 'must be');
}

/** One clear sentence per refusal: which field, and what it should have been. */
export function describeValidation(errors: FastifySchemaValidationError[], dataVar: string): string {
  const e = (errors[0] as SchemaFailure | undefined)?.error;
  if (!e) return `${dataVar} is invalid`;
  const at = `${dataVar}${pathOf(e.path)}`;
  if (e.type === ValueErrorType.ObjectRequiredProperty) return `${at} is required`;
  if (e.type === ValueErrorType.ObjectAdditionalProperties) {
    const slash = e.path.lastIndexOf('/');
    const key = fromPointer(e.path.slice(slash + 1));
    return `${dataVar}${pathOf(e.path.slice(0, slash))} has an unknown field '${key}'`;
  }
  return `${at} ${shouldBe(e)}`;
}

/** Installs the validator and the wording above for every route registered on `app`. */
export function installValidation(app: App): void {
  app.setValidatorCompiler(validatorCompiler as never);
  app.setSchemaErrorFormatter((errors, dataVar) => new Error(describeValidation(errors, dataVar)));
}
