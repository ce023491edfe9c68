// A failed command carries why (its type) beside the host's reason, from wherever it failed: the
// bound, a cancellation, the stream, the host's own result (its `error_type` on the wire) or the
// result's shape. The HTTP answer's status is chosen by that type, never by the message.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { COMMAND_FAILURE_TYPES, type CommandFailureType, type Frame, frame } from '../../protocol/frames.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { type App, createHttpApp } from '../http/app.ts';
import { getCommand } from './command-store.ts';
import { CommandError, Dispatcher } from './dispatcher.ts';

const TEAM = 'team_t';
const HOST = 'host_a';
const target = { hostId: HOST, teamId: TEAM, kind: 'sidecar' };
const EXEC = { service: 'app', cmd: ['true'] };

describe('a failed command says why', () => {
  let dir: string;
  let db: Db;
  let d: Dispatcher;
  const written: Frame[] = [];
  const nextCommand = (): Promise<Frame> =>
    withTimeout(
      (async () => {
        const seen = written.length;
        while (written.length === seen) await new Promise((r) => setImmediate(r));
        return written[written.length - 1];
      })(),
      10_000,
      () => new Error('no command written'),
    );
  const fails = async (run: Promise<unknown>, type: CommandFailureType, message: RegExp) => {
    const err = await run.then(
      () => assert.fail('the command succeeded'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof CommandError, String(err));
    assert.equal(err.type, type, err.message);
    assert.match(err.message, message);
    assert.equal((await getCommand(db, err.commandId))?.status, 'failed');
  };
  const answer = (cmd: Frame, fields: Partial<Frame>) =>
    d.received({
      hostId: HOST,
      teamId: TEAM,
      frame: frame('result', { command_id: cmd.command_id, ...fields }),
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-failures-'));
    db = (await openDb(join(dir, 'svc.db'))).db;
    d = new Dispatcher(db);
    d.connected({
      hostId: HOST,
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (f) => {
        written.push(f);
        return true;
      },
      current: () => true,
    });
  });
  after(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('not answered within its bound: timeout', async () => {
    await fails(d.run(target, 'env_1', 'env.exec', EXEC, 50), 'timeout', /^env\.exec timed out after 50 ms$/);
  });

  test('its caller gave up: cancelled', async () => {
    const stop = new AbortController();
    const run = d.run(target, 'env_2', 'env.exec', EXEC, 60_000, stop.signal);
    await nextCommand();
    stop.abort(new Error('the phase was cancelled'));
    await fails(run, 'cancelled', /^env\.exec cancelled: the phase was cancelled$/);
  });

  test("the host's stream dropped, or the host is not connected: host_gone", async () => {
    const run = d.run(target, 'env_3', 'env.exec', EXEC);
    await nextCommand();
    d.gone({ hostId: HOST, reason: 'host disconnected', replaced: false });
    await fails(run, 'host_gone', /^env\.exec: host disconnected$/);
    await fails(
      d.run({ ...target, hostId: 'host_b' }, 'env_3', 'env.exec', EXEC),
      'host_gone',
      /not connected/,
    );
  });

  test("the host's failed result: its own error_type, host_error when it names none", async () => {
    d.connected({
      hostId: HOST,
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (f) => written.push(f) > 0,
      current: () => true,
    });
    let run = d.run(target, 'env_4', 'env.exec', EXEC);
    answer(await nextCommand(), { ok: false, error: 'container app is not running' });
    await fails(run, 'host_error', /^container app is not running$/);
    run = d.run(target, 'env_4', 'env.exec', EXEC);
    answer(await nextCommand(), { ok: false, error: 'payload.cmd must be array', error_type: 'malformed' });
    await fails(run, 'malformed', /^payload\.cmd must be array$/);
  });

  test('a result that breaks its schema: malformed', async () => {
    const run = d.run(target, 'env_5', 'env.exec', EXEC);
    answer(await nextCommand(), { ok: true, payload: { exit_code: 'zero' } });
    await fails(run, 'malformed', /^malformed env\.exec result: /);
  });
});

describe("a failed command's HTTP status follows its type", () => {
  let app: App;
  before(async () => {
    app = await createHttpApp({ logger: false, version: 'test', verbose: false });
    app.get<{ Params: { type: CommandFailureType } }>('/fail/:type', async (req) => {
      // The same text for every type: only the type can choose the status.
      throw new CommandError(req.params.type, 'env.exec timed out after 130 s', 'cmd_1');
    });
    await app.ready();
  });
  after(() => app.close());

  test('timeout is a 504; cancelled, host_gone, host_error and malformed are 502s', async () => {
    const expected: Record<CommandFailureType, number> = {
      timeout: 504,
      cancelled: 502,
      host_gone: 502,
      host_error: 502,
      malformed: 502,
    };
    for (const type of COMMAND_FAILURE_TYPES) {
      const r = await app.inject({ method: 'GET', url: `/fail/${type}` });
      assert.equal(r.statusCode, expected[type], type);
      assert.deepEqual(r.json(), { error: 'env.exec timed out after 130 s' });
    }
  });
});
