// env.create runs the egress probe beside the health wait, not after it; an exec in the new
// environment must still wait for the probe's verdict: one sent while the probe is held runs only
// after the probe finished and env.create answered (the runner runs one command per environment at
// a time), although the container already takes execs then. Real Docker, real firewall rules.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sleep } from '../../shared/concurrency.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext } from '../context.ts';
import { PROBE_SOURCE } from '../docker/egress.ts';
import { primaryIPv4 } from '../docker/hostip.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { unmountUnder } from '../storage/quota.ts';
import { commandRunner, createPayload, testContext } from './testing.ts';

/** Polls `cond` every 50 ms for at most `ms` (a bound on waiting, not an assertion on time). */
async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  for (const end = Date.now() + ms; !(await cond()); await sleep(50))
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
}

describe('egress probe before the first exec', { skip: tier('docker'), timeout: 300_000 }, () => {
  const envId = testEnvId('egord');
  let dir: string;
  let ctx: SidecarContext;
  let listener: Server;
  let run: ReturnType<typeof commandRunner>;
  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-egord-'));
    ctx = await testContext(join(dir, 'data'));
    listener = createServer((s) => s.destroy());
    await new Promise<void>((resolve) => listener.listen(0, '0.0.0.0', resolve));
    run = commandRunner(ctx, envId, 'egord');
  });
  after(async () => {
    await run('env.destroy', {}).catch(() => {});
    listener.close();
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('an exec sent while env.create probes egress runs after the verdict', async () => {
    const [started, go, probed] = ['started', 'go', 'probed'].map((f) => join(dir, f));
    // The probe (run by nsenter in the container's network namespace, host file system) says it
    // began, waits for the test, then runs and records that it finished.
    const wrap = `touch ${started}; while [ ! -e ${go} ]; do sleep 0.05; done; "$0" "$@"; r=$?; touch ${probed}; exit $r`;
    ctx.probe = {
      internetTargets: [`${await primaryIPv4()}:${(listener.address() as { port: number }).port}`],
      command: ['sh', '-c', wrap, process.execPath, '-e', PROBE_SOURCE],
    };
    const payload = { ...createPayload([svc('box', BUSYBOX_IMAGE)], ''), egress: 'deny' };
    const create = run('env.create', payload);
    await until(() => existsSync(started), 120_000, 'the probe to start');
    const box = (await engineOf(ctx, envId).containers()).find((c) => c.service === 'box');
    assert.equal(box?.state, 'running', 'the probe runs beside a running container');
    let execDone = false;
    const exec = run('env.exec', { service: 'box', cmd: ['true'] }).then((r) => {
      execDone = true;
      return { r, probedFirst: existsSync(probed) };
    });
    // The container takes execs now; the environment's own exec is still held back, however
    // long the probe is (3 s is room for it to run a few times over if it were not held).
    execFileSync('docker', ['exec', box.id, 'true']);
    await Promise.race([exec, sleep(3000)]);
    assert.equal(execDone, false, 'the exec ran while the egress probe was still held');
    writeFileSync(go, '');
    const created = await create;
    assert.equal(created.ok, true, created.error);
    assert.equal((created.payload as { egress: string }).egress, 'denied (verified)');
    const { r, probedFirst } = await exec;
    assert.equal(r.ok, true, r.error);
    assert.equal(probedFirst, true, 'the exec answered before the probe had finished');
  });
});
