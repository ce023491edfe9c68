// Results come from outside (a sidecar or a provider): check the fields the orchestrator reads
// before anything trusts them, so a malformed result fails its phase with a clear reason. The checks
// are compiled once from the result schemas in protocol/results.ts.
import { Kind, type TSchema, Type } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import type { CommandKind } from '../../protocol/commands.ts';
import { RESULT_READS, RESULT_SCHEMAS } from '../../protocol/results.ts';

/**
 * host.report: capabilities need only be an object here; the host records (host-records.ts) check a
 * sidecar's with checkCapabilities (protocol/hello.ts), and driver hosts report their provider's.
 */
const RECEIPT = { ...RESULT_SCHEMAS, 'host.report': Type.Object({ capabilities: Type.Object({}) }) };

const CHECKS = new Map<CommandKind, TypeCheck<TSchema>>();
for (const kind of Object.keys(RESULT_READS) as CommandKind[]) {
  const reads = RESULT_READS[kind] as string[];
  CHECKS.set(kind, TypeCompiler.Compile(Type.Pick(RECEIPT[kind] as TSchema, reads)));
}
const ANY_OBJECT = TypeCompiler.Compile(Type.Object({}));

/** The word for a schema in a message: `object`, `array`, `string`, `number`, `number|null`. */
function word(schema: TSchema): string {
  switch (schema[Kind]) {
    case 'Record':
      return 'object';
    case 'Union':
      return (schema.anyOf as TSchema[]).map(word).join('|');
    case 'Literal':
      return JSON.stringify(schema.const);
    default:
      return String(schema[Kind]).toLowerCase();
  }
}

/** A result that breaks its kind's schema: the command fails as `malformed`. */
export class MalformedResult extends Error {}

export function checkResult(kind: CommandKind, result: unknown): unknown {
  if (!ANY_OBJECT.Check(result)) throw new MalformedResult(`malformed ${kind} result: not an object`);
  const check = CHECKS.get(kind);
  if (!check || check.Check(result)) return result;
  // Report the first failing field in the order the result lists them, as the orchestrator reads them.
  const reads = RESULT_READS[kind] as string[];
  const rank = (path: string) => reads.indexOf(path.split('/')[1] ?? '');
  const error = [...check.Errors(result)].sort((a, b) => rank(a.path) - rank(b.path))[0];
  if (error) {
    const field = error.path.slice(1).replaceAll('/', '.');
    throw new MalformedResult(`malformed ${kind} result: ${field} must be ${word(error.schema)}`);
  }
  return result;
}
