// The typed calls: path templates are filled with each value encoded, queries become strings, and
// tsc refuses a call that the OpenAPI does not describe (the @ts-expect-error lines below fail the
// typecheck when such a call is accepted, e.g. after the types degrade to any).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ApiAnswer, type ApiBody, fillPath, queryStrings } from './api-types.ts';
import type { Client } from './http.ts';

test('fillPath encodes every parameter and refuses a missing one', () => {
  assert.equal(
    fillPath('/v1/envs/{env}/processes/{pid}/signal', { env: 'a/b c', pid: 'p?1' }),
    '/v1/envs/a%2Fb%20c/processes/p%3F1/signal',
  );
  assert.equal(fillPath('/v1/projects', undefined), '/v1/projects');
  assert.throws(() => fillPath('/v1/envs/{env}', {}), /no value for \{env\}/);
});

test('queryStrings turns numbers and booleans into strings and leaves undefined out', () => {
  assert.deepEqual(queryStrings({ service: 's', depth: 2, all: false, mode: undefined }), {
    service: 's',
    depth: '2',
    all: 'false',
  });
  assert.deepEqual(queryStrings(undefined), {});
});

// Type-level checks: compiled by `npm run typecheck`, never called.
export async function typeChecks(c: Client): Promise<unknown[]> {
  const exec: ApiAnswer<'post', '/v1/envs/{env}/exec'> = await c.call('post', '/v1/envs/{env}/exec', {
    path: { env: 'e' },
    json: { service: 's', cmd: ['true'] },
  });
  const code: number = exec.exit_code;
  const body: ApiBody<'post', '/v1/envs/{env}/verify'> = { resume: true };
  // @ts-expect-error the body lacks cmd
  await c.call('post', '/v1/envs/{env}/exec', { path: { env: 'e' }, json: { service: 's' } });
  // @ts-expect-error no such route
  await c.call('post', '/v1/envs/{env}/exek', { path: { env: 'e' }, json: { service: 's', cmd: [] } });
  // @ts-expect-error the path parameter is missing
  await c.call('post', '/v1/envs/{env}/exec', { json: { service: 's', cmd: [] } });
  // @ts-expect-error the required query is missing
  await c.call('get', '/v1/envs/{env}/fs/list', { path: { env: 'e' } });
  const fork = await c.call('post', '/v1/envs/{env}/fork', { path: { env: 'e' }, json: {} });
  // @ts-expect-error a fan-out answer has no top-level deployment: the union must be narrowed
  fork.deployment.ID;
  await c.call('post', '/v1/envs/{env}/processes/{pid}/signal', {
    path: { env: 'e', pid: 'p' },
    // @ts-expect-error a signal outside the API's list
    json: { signal: 'BOOM' },
  });
  return [code, body];
}
