// Building blocks of the API's schemas, shared by records, request bodies and answers.
import { Kind, type TSchema, type TUnsafe, Type, TypeRegistry } from '@sinclair/typebox';

export const Str = Type.String();
export const Time = Type.String({ description: 'ISO 8601' });
export const NullableTime = Type.Union([Time, Type.Null()]);
export const Json = Type.Record(Type.String(), Type.Unknown());

// A kind of TypeBox's own registry (not state of ours): how its compiler checks a StringEnum.
if (!TypeRegistry.Has('StringEnum')) {
  TypeRegistry.Set<{ enum: string[] }>(
    'StringEnum',
    (schema, value) => typeof value === 'string' && schema.enum.includes(value),
  );
}

/**
 * A string restricted to `values`, typed as their union and shown in OpenAPI as an `enum` (so the
 * generated clients get the union). The route type provider infers with typebox 1.x, which reads
 * enums by its `~kind` marker, hence the cast.
 */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  opts: { description?: string } = {},
) {
  return Type.Unsafe<T[number]>({
    [Kind]: 'StringEnum',
    type: 'string',
    enum: [...values],
    ...opts,
  }) as TUnsafe<T[number]> & { '~kind': 'Enum'; enum: [...T] };
}

/** A request body object: unknown fields are refused (they are usually typos). */
export function Body<T extends Record<string, TSchema>>(props: T, description?: string) {
  return Type.Object(props, { additionalProperties: false, description });
}
