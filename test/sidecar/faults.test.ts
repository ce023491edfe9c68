// No single exception kills the sidecar: the real svcd with faults injected where nothing of its
// own catches them (test/support/inject-fault.ts) logs each with its stack and its count, and
// goes on answering commands; it exits only where going on would be unsafe, saying why.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { EXIT_UNSAFE } from '../../sidecar/main.ts';
import { exited, svcd, svcdJoinArgs, until } from '../support/svcd.ts';
import { tier } from '../support/tiers.ts';
import { FakeControlPlane } from './control-plane.ts';

const INJECT = new URL('../support/inject-fault.ts', import.meta.url).pathname;

describe('svcd with injected faults', { skip: tier('docker') }, () => {
  let cp: FakeControlPlane;
  let dir: string;
  let child: ReturnType<typeof svcd> | null = null;
  before(async () => {
    cp = await new FakeControlPlane().listen();
    dir = mkdtempSync(join(tmpdir(), 'svcd-faults-'));
  });
  after(async () => {
    child?.kill('SIGKILL');
    await cp.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A joined svcd that takes faults over IPC. */
  async function start(): Promise<NonNullable<typeof child>> {
    const hellos = cp.hellos.length;
    child = svcd(
      svcdJoinArgs(cp.url, 'djt_abc', dir).slice(1),
      {},
      { nodeArgs: ['--import', INJECT], ipc: true },
    );
    await until(() => cp.hellos.length > hellos, 60_000, 'hello');
    return child;
  }

  test('a throw in a timer, in an event handler and a rejected promise are logged and counted; commands are still answered', async () => {
    const c = await start();
    for (const fault of ['timer', 'handler', 'rejection']) c.send(fault);
    await until(
      () => /unhandledRejection \(1 so far\)/.test(c.out()) && /uncaughtException \(2 so far\)/.test(c.out()),
      20_000,
      'the faults logged and counted',
    );
    for (const what of [
      'a timer callback threw',
      'an event handler threw',
      'a promise nobody awaited rejected',
    ])
      assert.match(
        c.out(),
        new RegExp(`injected fault: ${what}\\n\\s+at `),
        `${what}: logged with its stack`,
      );
    assert.equal(c.exitCode, null, 'svcd is still running');
    cp.send('cmd_after_faults', 'host.report', '', {});
    const r = await cp.result('cmd_after_faults');
    assert.equal(r.ok, true, JSON.stringify(r));
    c.kill('SIGTERM');
    assert.equal(await exited(c), 0, 'and it still stops cleanly');
  });

  test('a fault after which going on is unsafe: svcd exits, and its last line says why', async () => {
    const c = await start();
    c.send('internal');
    assert.equal(await exited(c), EXIT_UNSAFE);
    assert.match(c.out(), /svcd: exiting: Node reported an internal failure \(ERR_INTERNAL_ASSERTION\)/);
  });
});
