import assert from 'node:assert/strict';
import { test } from 'node:test';
import { COMMAND_FAILURE_TYPES, FrameError, parseFrame } from './frames.ts';

const result = (fields: object) =>
  JSON.stringify({ type: 'result', command_id: 'cmd_1', ok: false, error: 'it failed', ...fields });

test("a failed result's error_type is one of the failure types, or absent", () => {
  for (const type of COMMAND_FAILURE_TYPES)
    assert.equal(parseFrame(result({ error_type: type })).error_type, type);
  assert.equal(parseFrame(result({})).error_type, undefined);
  for (const bad of ['timed out', 42, null])
    assert.throws(
      () => parseFrame(result({ error_type: bad })),
      (e: unknown) =>
        e instanceof FrameError &&
        e.message ===
          'frame field error_type must be one of timeout, cancelled, host_gone, host_error, malformed',
    );
});
