// Command payloads come from the network: the runner checks each one on receipt, before its handler
// touches Docker or the disk, against the payload's one schema in protocol/payloads.ts (checks
// compiled once). A missing field that has a schema `default` is filled in first, so the leniency
// comes from the same definition. Then the domain rules the schema cannot say (names that become
// file and dataset names, absolute paths, one-time URLs) are checked explicitly. A refusal is a
// PayloadError whose message names the field.
import { Kind, type TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import type { CommandKind, Payloads } from '../protocol/commands.ts';
import { type BlobRefType, PAYLOAD_SCHEMAS } from '../protocol/payloads.ts';

export class PayloadError extends Error {}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

const CHECKS = new Map<string, TypeCheck<TSchema>>(
  Object.entries(PAYLOAD_SCHEMAS).map(([kind, schema]) => [kind, TypeCompiler.Compile(schema)]),
);

/** What a schema expects, as a message says it: `a string`, `a non-empty list of strings`, ... */
export function expected(schema: TSchema): string {
  switch (schema[Kind]) {
    case 'String':
      return 'a string';
    case 'Boolean':
      return 'a boolean';
    case 'Null':
      return 'null';
    case 'Number':
      return 'a number';
    case 'Integer':
      return schema.minimum !== undefined && schema.maximum !== undefined
        ? `an integer from ${schema.minimum} to ${schema.maximum}`
        : schema.minimum === 1
          ? 'a positive integer'
          : 'an integer';
    case 'Literal':
      return `'${schema.const}'`;
    case 'Array': {
      const of = schema.items[Kind] === 'String' ? 'strings' : 'objects';
      return `a ${schema.minItems ? 'non-empty ' : ''}list of ${of}`;
    }
    case 'Record':
      return 'a map';
    case 'Union':
      return (schema.anyOf as TSchema[]).map(expected).join(' or ');
    default:
      return 'an object';
  }
}

/** `/services/0/name` → `services[0].name`. */
const fieldOf = (path: string) =>
  path
    .slice(1)
    .split('/')
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');

/**
 * The payload of a `kind` command, checked: defaults filled in, the schema's check, then the kind's
 * domain rules. An absent payload is an empty object. Throws PayloadError.
 */
export function readPayload<K extends CommandKind>(kind: K, raw: unknown): Payloads[K] {
  const check = CHECKS.get(kind);
  if (!check) throw new PayloadError(`no payload schema for ${kind}`);
  const value = raw ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new PayloadError('payload must be an object');
  Value.Default(check.Schema(), value);
  if (!check.Check(value)) {
    const error = check.Errors(value).First();
    if (error) throw new PayloadError(`payload.${fieldOf(error.path)} must be ${expected(error.schema)}`);
  }
  const payload = value as Payloads[K];
  (RULES[kind] as ((p: Payloads[K]) => void) | undefined)?.(payload);
  return payload;
}

export function name(value: string, what: string): string {
  if (!NAME.test(value)) throw new PayloadError(`${what} '${value.slice(0, 80)}' is not a valid name`);
  return value;
}

export function absolutePath(path: string, what: string): string {
  if (!path.startsWith('/') || path.includes('\0') || path.split('/').includes('..')) {
    throw new PayloadError(`${what} '${path.slice(0, 100)}' must be absolute without '..'`);
  }
  return path;
}

function blob(b: BlobRefType | undefined, what: string): void {
  if (b && !/^https?:\/\//.test(b.url)) throw new PayloadError(`payload.${what} must be {url, token}`);
}

type Stack = Payloads['env.create'] | Payloads['env.fork'];

function fsTarget(p: { service: string; path: string }): void {
  name(p.service, 'payload.service');
  absolutePath(p.path, 'path');
}

function stack(p: Stack): void {
  p.services.forEach((s, i) => {
    name(s.name, `payload.services[${i}].name`);
    if (!s.image) throw new PayloadError(`service '${s.name}' has no image`);
  });
  for (const v of p.volumes) name(v, 'volume name');
  if (p.agent && !p.services.some((s) => s.name === p.agent))
    throw new PayloadError(`payload.agent '${p.agent.slice(0, 80)}' is not one of the services`);
}

/** The rules each kind's payload must meet beyond its schema. */
const RULES: { [K in CommandKind]?: (p: Payloads[K]) => void } = {
  'env.create': stack,
  'env.fork': (p) => {
    name(p.from_env, 'payload.from_env');
    name(p.from_snapshot, 'payload.from_snapshot');
    stack(p);
  },
  'env.snapshot': (p) => void name(p.name, 'payload.name'),
  'env.rollback': (p) => void name(p.snapshot, 'payload.snapshot'),
  'env.exec': (p) => void name(p.service, 'payload.service'),
  'env.put': (p) => {
    name(p.service, 'payload.service');
    absolutePath(p.path, 'path');
    blob(p.blob, 'blob');
  },
  'env.get': (p) => {
    name(p.service, 'payload.service');
    absolutePath(p.path, 'path');
    blob(p.upload, 'upload');
  },
  'fs.stat': (p) => fsTarget(p),
  'fs.list': (p) => fsTarget(p),
  'fs.mkdir': (p) => fsTarget(p),
  'fs.remove': (p) => fsTarget(p),
  'fs.move': (p) => {
    name(p.service, 'payload.service');
    absolutePath(p.from, 'from');
    absolutePath(p.to, 'to');
  },
  'fs.read': (p) => {
    fsTarget(p);
    blob(p.upload, 'upload');
  },
  'fs.write': (p) => {
    fsTarget(p);
    blob(p.blob, 'blob');
  },
  'fs.watch': (p) => {
    fsTarget(p);
    blob(p.upload, 'upload');
  },
  'verify.collect': (p) => {
    name(p.id, 'payload.id');
    name(p.agent_service, 'payload.agent_service');
    for (const x of p.collect) absolutePath(x, 'collect path');
  },
  'verify.run': (p) => {
    name(p.id, 'payload.id');
    const v = p.verifier;
    if (Boolean(v.image) === Boolean(v.service))
      throw new PayloadError('payload.verifier needs exactly one of image or service');
    if (v.command.length === 0) throw new PayloadError('payload.verifier.command must not be empty');
  },
};
