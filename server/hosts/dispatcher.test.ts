// The dispatcher learns of host streams only from the hub's events (spec "Command lifecycle"):
// `hello` hands it the stream's send handle, `frame` brings acks, progress and results, and
// `gone` fails the host's commands in flight at once. Here the events are fed by hand, with no hub.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Frame, frame } from '../../protocol/frames.ts';
import { withTimeout } from '../../shared/concurrency.ts';
import { openDb } from '../db/open.ts';
import type { Db } from '../db/types.ts';
import { getCommand } from './command-store.ts';
import { CommandError, Dispatcher, type LateResult } from './dispatcher.ts';
import type { HostHello } from './hub-events.ts';

const TEAM = 'team_t';
const target = (hostId: string) => ({ hostId, teamId: TEAM, kind: 'sidecar' });
const EXEC = { service: 'app', cmd: ['true'] };

describe('the dispatcher follows the hub', () => {
  let dir: string;
  let db: Db;
  let d: Dispatcher;
  /** Frames written on each host's stream. */
  const written = new Map<string, Frame[]>();
  const hello = (hostId: string): HostHello => {
    written.set(hostId, []);
    return {
      hostId,
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (f) => {
        written.get(hostId)?.push(f);
        return true;
      },
      current: () => true,
    };
  };
  /** The next command written to `hostId`, once it is written (bounded). */
  const commandTo = (hostId: string): Promise<Frame> =>
    withTimeout(
      (async () => {
        const before = written.get(hostId)?.length ?? 0;
        while ((written.get(hostId)?.length ?? 0) === before) await new Promise((r) => setImmediate(r));
        return written.get(hostId)?.at(-1) as Frame;
      })(),
      10_000,
      () => new Error(`no command written to ${hostId}`),
    );
  const result = (hostId: string, cmd: Frame, payload: unknown) =>
    d.received({
      hostId,
      teamId: TEAM,
      frame: frame('result', { command_id: cmd.command_id, ok: true, payload }),
    });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-dispatcher-'));
    db = (await openDb(join(dir, 'svc.db'))).db;
    d = new Dispatcher(db);
  });
  after(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("a command goes out on the stream of the host's hello; its result frame resolves it", async () => {
    d.connected(hello('host_a'));
    const run = d.run(target('host_a'), 'env_1', 'env.exec', EXEC);
    const cmd = await commandTo('host_a');
    assert.equal(cmd.kind, 'env.exec');
    assert.equal(cmd.env_id, 'env_1');
    await result('host_a', cmd, { exit_code: 3, stdout: 'x', stderr: '' });
    assert.equal((await run).exit_code, 3);
    assert.equal((await getCommand(db, cmd.command_id as string))?.status, 'succeeded');
  });

  test("gone fails that host's commands in flight with the reason, and only that host's", async () => {
    d.connected(hello('host_b'));
    d.connected(hello('host_c'));
    const onB = d.run(target('host_b'), 'env_2', 'env.exec', EXEC);
    const cmdB = await commandTo('host_b');
    const onC = d.run(target('host_c'), 'env_3', 'env.exec', EXEC);
    const cmdC = await commandTo('host_c');
    d.gone({ hostId: 'host_b', reason: 'host disconnected', replaced: false });
    await assert.rejects(
      onB,
      (e: Error) => e instanceof CommandError && e.message === 'env.exec: host disconnected',
    );
    const row = await getCommand(db, cmdB.command_id as string);
    assert.equal(row?.status, 'failed');
    assert.equal(row?.error, 'env.exec: host disconnected');
    // The other host's command is still awaited and completes.
    await result('host_c', cmdC, { exit_code: 0, stdout: '', stderr: '' });
    assert.equal((await onC).exit_code, 0);
  });

  test('after gone, a command for the host fails at once as not connected', async () => {
    d.connected(hello('host_d'));
    d.gone({ hostId: 'host_d', reason: 'host disconnected', replaced: false });
    await assert.rejects(
      d.run(target('host_d'), 'env_4', 'env.exec', EXEC),
      (e: Error) => e.message === 'host host_d is not connected',
    );
    assert.deepEqual(written.get('host_d'), []);
  });

  test('a replaced stream: commands in flight fail, and the next goes out on the new stream', async () => {
    d.connected(hello('host_e'));
    const old = written.get('host_e') as Frame[];
    const inFlight = d.run(target('host_e'), 'env_5', 'env.exec', EXEC);
    await commandTo('host_e');
    d.gone({ hostId: 'host_e', reason: 'host reconnected on a newer stream', replaced: true });
    await assert.rejects(inFlight, /env\.exec: host reconnected on a newer stream/);
    d.connected(hello('host_e'));
    const next = d.run(target('host_e'), 'env_5', 'env.exec', EXEC);
    const cmd = await commandTo('host_e');
    assert.equal(old.length, 1, 'nothing more on the old stream');
    await result('host_e', cmd, { exit_code: 0, stdout: '', stderr: '' });
    assert.equal((await next).exit_code, 0);
  });

  test('a result nobody awaits (unknown, finished or from another host) is emitted as late', async () => {
    const late: LateResult[] = [];
    const off = d.on('late', (e) => {
      late.push(e);
    });
    d.connected(hello('host_f'));
    const run = d.run(target('host_f'), 'env_6', 'env.exec', EXEC);
    const cmd = await commandTo('host_f');
    await result('host_g', cmd, { exit_code: 1, stdout: '', stderr: '' }); // a foreign host's claim
    await result('host_f', cmd, { exit_code: 0, stdout: '', stderr: '' });
    await result('host_f', cmd, { exit_code: 0, stdout: '', stderr: '' }); // a duplicate
    await result('host_f', frame('command', { command_id: 'cmd_unknown' }), {});
    off();
    assert.equal((await run).exit_code, 0);
    assert.deepEqual(
      late.map((l) => [l.hostId, l.frame.command_id]),
      [
        ['host_g', cmd.command_id],
        ['host_f', cmd.command_id],
        ['host_f', 'cmd_unknown'],
      ],
    );
  });
});

describe('command rows wait for company only while other commands are in flight', () => {
  test('a lone command never waits; three at once share waiting commits; alone again, no wait', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-dispatcher-rows-'));
    const db = (await openDb(join(dir, 'svc.db'))).db;
    const d = new Dispatcher(db, undefined, undefined, 1); // SVC_COMMIT_DELAY_MS=1
    const sent: Frame[] = [];
    d.connected({
      hostId: 'host_r',
      teamId: TEAM,
      cloudId: '',
      capabilities: {},
      send: (f) => {
        sent.push(f);
        return true;
      },
      current: () => true,
    });
    const written = (n: number) =>
      withTimeout(
        (async () => {
          while (sent.length < n) await new Promise((r) => setImmediate(r));
        })(),
        10_000,
        () => new Error(`${n} commands were not written`),
      );
    const answer = (cmd: Frame) =>
      d.received({
        hostId: 'host_r',
        teamId: TEAM,
        frame: frame('result', {
          command_id: cmd.command_id,
          ok: true,
          payload: { exit_code: 0, stdout: '', stderr: '' },
        }),
      });
    const lone = async () => {
      const run = d.run(target('host_r'), 'env_lone', 'env.exec', EXEC);
      await written(sent.length + 1);
      answer(sent.at(-1) as Frame);
      await run;
    };
    try {
      await lone();
      assert.equal(d.rowStats.delayed, 0);
      const runs = ['env_r1', 'env_r2', 'env_r3'].map((e) => d.run(target('host_r'), e, 'env.exec', EXEC));
      await written(4);
      for (const cmd of sent.slice(1)) answer(cmd);
      await Promise.all(runs);
      const delayed = d.rowStats.delayed;
      assert.ok(delayed > 0, JSON.stringify(d.rowStats));
      await lone();
      assert.equal(d.rowStats.delayed, delayed);
      assert.equal(d.rowStats.writes, 10);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
