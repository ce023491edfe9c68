// No single exception kills the control plane: the real `svc-server` program with faults injected
// where nothing of its own catches them (test/support/inject-fault.ts) logs each with its stack,
// counts it in GET /metrics (svc_uncaught_errors_total{kind}), and keeps serving; it exits only
// where going on would be unsafe, with a line that says why.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { EXIT_UNSAFE } from '../../server/main.ts';
import { assertAliveAfter } from '../support/alive.ts';
import { sample } from '../support/metrics.ts';
import { type Child, startChild, stop } from '../support/program.ts';
import { dbTarget } from '../support/server.ts';

const INJECT = new URL('../support/inject-fault.ts', import.meta.url).pathname;
const key = `dak_test${randomBytes(16).toString('hex')}`;
const operator = `metrics-${randomBytes(16).toString('hex')}`;
let target: string;
let cleanup = () => {};
before(async () => {
  ({ target, cleanup } = await dbTarget('sqlite'));
});
after(() => cleanup());

const start = () =>
  startChild(
    target,
    { SVC_BOOTSTRAP_KEY: key, SVC_METRICS_TOKEN: operator },
    { nodeArgs: ['--import', INJECT], ipc: true },
  );

/** Sends one fault and waits for the child to have armed it (or to have exited). */
function inject(child: Child, fault: string): Promise<void> {
  const armed = new Promise<void>((resolve) => {
    child.proc.once('message', () => resolve());
    child.proc.send(fault);
  });
  return Promise.race([armed, child.exited.then(() => {})]);
}

async function uncaught(child: Child, kind: string): Promise<number> {
  const r = await fetch(`${child.url}/metrics`, { headers: { authorization: `Bearer ${operator}` } });
  return sample(await r.text(), 'svc_uncaught_errors_total', { kind });
}

test('a throw in a timer, in an event handler and a rejected promise are logged, counted, and the server serves on', async () => {
  const child = await start();
  try {
    assert.equal(await uncaught(child, 'uncaughtException'), 0);
    assert.equal(await uncaught(child, 'unhandledRejection'), 0);
    for (const fault of ['timer', 'handler', 'rejection']) await inject(child, fault);
    // The faults run on the child's next turns; the counter is what says they have.
    while (
      (await uncaught(child, 'uncaughtException')) < 2 ||
      (await uncaught(child, 'unhandledRejection')) < 1
    ) {
      assert.equal(child.proc.exitCode, null, `svc-server exited: ${child.stderr()}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(await uncaught(child, 'uncaughtException'), 2);
    assert.equal(await uncaught(child, 'unhandledRejection'), 1);
    await assertAliveAfter(child.url, 0, child.proc);
    const log = child.stdout();
    for (const what of [
      'a timer callback threw',
      'an event handler threw',
      'a promise nobody awaited rejected',
    ])
      assert.match(log, new RegExp(`injected fault: ${what}\\\\n\\s+at `), `${what}: logged with its stack`);
    assert.equal(await stop(child), 0, 'it still stops cleanly');
  } finally {
    child.proc.kill('SIGKILL');
  }
});

test('a fault after which going on is unsafe: the server exits, and its last line says why', async () => {
  const child = await start();
  try {
    await inject(child, 'internal');
    assert.equal(await child.exited, EXIT_UNSAFE);
    assert.match(
      child.stderr(),
      /svc-server: exiting: Node reported an internal failure \(ERR_INTERNAL_ASSERTION\)/,
    );
  } finally {
    child.proc.kill('SIGKILL');
  }
});
