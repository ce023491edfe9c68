// verify.collect on real Docker against a sibling service that shares the agent's volume and keeps
// swapping the collected directory with a symlink to a host directory (with only the
// agent frozen and a path-string walk, 1 verify in 3 copied host files). 200 collects: no byte of
// the host directory reaches the submission or a result. Then destroy removes the verify work
// directories and the stored results of the environment's commands.
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ServiceRecord } from '../../protocol/spec.ts';
import { sleep } from '../../shared/concurrency.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { engineOf, type SidecarContext, saveSpec, stackOf } from '../context.ts';
import { svc, testEnvId } from '../docker/testing.ts';
import { commandRunner, testContext } from '../handlers/testing.ts';
import { unmountUnder } from '../storage/quota.ts';

const MARKER = 'HOST-SECRET-c0ffee42';

function allText(dir: string): string {
  if (!existsSync(dir)) return '';
  let out = '';
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    out += name + (statSync(p).isDirectory() ? allText(p) : readFileSync(p, 'utf8'));
  }
  return out;
}

describe('verify.collect races a swapping sibling on real Docker', { skip: tier('docker') }, () => {
  const envId = testEnvId('race');
  let dir: string;
  let ctx: SidecarContext;
  let run: ReturnType<typeof commandRunner>;

  before(async () => {
    await ensureTestImages();
    dir = mkdtempSync(join(tmpdir(), 'svc-race-'));
    const secret = join(dir, 'hostsecret');
    mkdirSync(secret, { mode: 0o700 });
    for (let i = 0; i < 4; i++) writeFileSync(join(secret, `key${i}`), `${MARKER}\n`, { mode: 0o600 });
    ctx = await testContext(join(dir, 'data'));
    run = commandRunner(ctx, envId, 'race');
    // The sibling swaps /work/sub and a symlink to the host directory as fast as busybox can.
    const swap = `mkdir -p /work/sub; for i in 1 2 3 4; do echo mine > /work/sub/answer$$i; done; cd /work; while :; do mv sub sub.real; ln -s ${secret} sub; mv sub sub.link; mv sub.real sub; rm sub.link; done`;
    const services: ServiceRecord[] = [
      svc('agent', BUSYBOX_IMAGE, { user: '1000:1000', volumes: ['work:/work'] }),
      svc('sibling', BUSYBOX_IMAGE, { volumes: ['work:/work'], command: ['sh', '-c', swap] }),
    ];
    const spec = { services, volumes: ['work'], egress: 'allow' as const };
    const paths = await ctx.storage.prepare(envId, spec.volumes);
    await saveSpec(ctx, envId, spec);
    await stackOf(ctx, envId, spec, paths).up(120);
  });
  after(async () => {
    await run('env.destroy', {}).catch(() => {});
    await unmountUnder(dir);
    rmSync(dir, { recursive: true, force: true });
  });

  test('200 collects: the copy holds only the agent files or is refused, never a host byte', async () => {
    const engine = engineOf(ctx, envId);
    const outcomes = { copied: 0, refused: 0, missing: 0 };
    for (let round = 0; round < 200; round++) {
      const r = await run('verify.collect', {
        id: `dep_race${round}`,
        agent_service: 'agent',
        collect: ['/work/sub'],
      });
      assert.equal(r.ok, true, r.error);
      assert.ok(!JSON.stringify(r.payload).includes(MARKER));
      const res = r.payload as { files: number; refused: string[]; missing: string[] };
      if (res.refused.length) outcomes.refused++;
      else if (res.missing.length) outcomes.missing++;
      else outcomes.copied++;
      const copy = join(ctx.dataDir, 'verify', `dep_race${round}`);
      assert.ok(!allText(copy).includes(MARKER), `round ${round}: a host file reached the submission`);
      // The sibling was frozen for the copy and runs again; the agent stays paused until we resume it.
      // (Docker 20.10 reports pause/resume late under load: wait, bounded, for its report.)
      const states = async () =>
        Object.fromEntries((await engine.containers()).map((c) => [c.service, c.state]));
      const settled = async () => {
        const now = await states();
        return now.agent === 'paused' && now.sibling === 'running';
      };
      for (let i = 0; i < 500 && !(await settled()); i++) await sleep(20);
      assert.deepEqual(await states(), { agent: 'paused', sibling: 'running' });
      await engine.unpause(['agent']);
    }
    assert.ok(outcomes.copied > 0, JSON.stringify(outcomes));
    const stored = readdirSync(join(ctx.dataDir, 'commands')).filter((f) => f.endsWith('.json'));
    for (const f of stored)
      assert.ok(!readFileSync(join(ctx.dataDir, 'commands', f), 'utf8').includes(MARKER));
  });

  test('destroy removes the verify work directories and the stored command results', async () => {
    const ex = await run('env.exec', { service: 'agent', cmd: ['echo', 'exec-output-to-forget'] });
    assert.equal(ex.ok, true, ex.error);
    const cmdFile = join(ctx.dataDir, 'commands', `${ex.id}.json`);
    assert.ok(existsSync(cmdFile));
    assert.ok(readdirSync(join(ctx.dataDir, 'verify')).length >= 200);
    const d = await run('env.destroy', {});
    assert.equal(d.ok, true, d.error);
    assert.deepEqual(readdirSync(join(ctx.dataDir, 'verify')), []);
    const left = readdirSync(join(ctx.dataDir, 'commands')).filter((f) => f.endsWith('.json'));
    assert.deepEqual(left, [`${d.id}.json`], 'only the destroy result itself stays');
  });
});
