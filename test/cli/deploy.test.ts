// The verbs that start a deployment (deploy, fork, snapshot, rollback, verify): `--wait` lines,
// `--wait=false` JSON, failed and rolled-back deployments exit 1; and deployment get|watch,
// env destroy. The host is a fake sidecar whose answers each test can script.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AGENT_COMPOSE, SIMPLE_COMPOSE } from '../orchestrator/harness.ts';
import {
  assertExit,
  assertFails,
  type CliWorld,
  cliWorld,
  finalLine,
  type Run,
  removeDir,
  SVC,
} from './harness.ts';

const DEPLOY_PHASES = [
  'resolve',
  'place',
  'provision',
  'join',
  'prepare',
  'start',
  'health',
  'warm',
  'snapshot',
  'ingress',
  'verdict',
];

/** The `  <phase> <status> ...` lines of a waited run, as [name, status]. */
const phaseLines = (r: Run) =>
  r.stdout
    .split('\n')
    .filter((l) => l.startsWith('  '))
    .map((l) => l.trim().split(/\s+/).slice(0, 2));

describe('deployment verbs', () => {
  let w: CliWorld;
  let n = 0;
  before(async () => {
    w = await cliWorld('sqlite');
    writeFileSync(join(w.home, 'compose.yaml'), SIMPLE_COMPOSE);
    writeFileSync(join(w.home, 'agent.yaml'), AGENT_COMPOSE);
  });
  after(() => w.close());

  const project = async () => {
    const r = await w.t.req('POST', '/v1/projects', { body: { name: `dp${++n}` } });
    assert.equal(r.status, 201);
    return { name: r.body.project.Name as string, alpha: r.body.environments[0].ID as string };
  };
  const api = async (path: string) => (await w.t.req('GET', path)).body;

  test('deploy --wait: one line per phase in order, then deployment <id>: succeeded', async () => {
    const p = await project();
    const r = await w.run(['deploy', '--project', p.name]);
    assertExit(r, 0);
    const { id, status } = finalLine(r);
    assert.equal(status, 'succeeded');
    const view = await api(`/v1/deployments/${id}`);
    assert.deepEqual(
      phaseLines(r),
      view.phases.map((ph: { Name: string; Status: string }) => [ph.Name, ph.Status]),
    );
    assert.deepEqual(
      phaseLines(r).map((x) => x[0]),
      DEPLOY_PHASES,
    );
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines[0], `deploy ${id} on ${p.alpha}`);
    assert.match(
      r.stdout,
      /^ {2}resolve +ok +\d+(ms|\.\ds) +version=ver_\S+ number=1 services=app,db volumes=data,pg$/m,
    );
    assert.match(r.stdout, /^ {2}place +ok .*reason=first connected host in team/m);
    assert.match(r.stdout, /^ {2}provision +skipped/m);
    assert.equal(lines.at(-2), `version: ${view.deployment.VersionID}`);
    assert.ok(!r.stdout.includes('\r'), 'no spinner on a pipe');
    assert.equal(r.stderr, '');
  });

  test('deploy -f, --env, --warm split on whitespace', async () => {
    const p = await project();
    writeFileSync(join(w.home, 'other.yaml'), SIMPLE_COMPOSE);
    const r = await w.run([
      'deploy',
      '--project',
      p.name,
      '--env',
      'beta',
      '-f',
      'other.yaml',
      '--warm',
      'echo  hi\tthere',
    ]);
    assertExit(r, 0);
    const exec = w.sc.commands('env.exec').at(-1)!;
    assert.deepEqual((exec.payload as { cmd: string[] }).cmd, ['echo', 'hi', 'there']);
    assert.match(r.stdout, /^ {2}warm +ok .*exit=0/m);
    const envs = (await api(`/v1/projects/${p.name}/envs`)).environments.map((e: { Name: string }) => e.Name);
    assert.ok(envs.includes('beta'), JSON.stringify(envs));
    const eq = await w.run(['deploy', `--project=${p.name}`, '--file=other.yaml', '--wait=true']);
    assertExit(eq, 0);
  });

  test('deploy --wait=false prints the 202 answer as indented JSON and returns', async () => {
    const p = await project();
    const r = await w.run(['deploy', '--project', p.name, '--wait=false']);
    assertExit(r, 0);
    const body = JSON.parse(r.stdout);
    assert.equal(r.stdout, `${JSON.stringify(body, null, 2)}\n`);
    assert.equal(body.deployment.Kind, 'deploy');
    assert.deepEqual(
      body.phases.map((ph: { Name: string }) => ph.Name),
      DEPLOY_PHASES,
    );
    const watched = await w.run(['deployment', 'watch', body.deployment.ID]);
    assertExit(watched, 0);
    assert.deepEqual(finalLine(watched), { id: body.deployment.ID, status: 'succeeded' });
  });

  test('a failed deployment exits 1 with its error; a rolled-back deploy too', async () => {
    const p = await project();
    w.sc.handlers['env.create'] = () => {
      throw new Error('image pull failed');
    };
    try {
      const failed = await w.run(['deploy', '--project', p.name]);
      assertExit(failed, 1);
      assert.equal(finalLine(failed).status, 'failed');
      assert.match(failed.stdout, /^ {2}prepare +failed .*error: .*image pull failed/m);
      assert.match(failed.stdout, /^ {2}start +skipped/m);
      assert.match(failed.stderr, /^svc: deploy failed: prepare: .*image pull failed\n$/);
      const watched = await w.run(['deployment', 'watch', finalLine(failed).id]);
      assertExit(watched, 1);
    } finally {
      delete w.sc.handlers['env.create'];
    }
    assertExit(await w.run(['deploy', '--project', p.name]), 0);
    w.sc.handlers['env.snapshot'] = () => {
      throw new Error('disk full');
    };
    try {
      const rolled = await w.run(['deploy', '--project', p.name]);
      assertExit(rolled, 1);
      assert.equal(finalLine(rolled).status, 'rolled_back');
      assert.match(rolled.stderr, /^svc: deploy failed and was rolled back: snapshot: .*disk full\n$/);
      assert.match(rolled.stdout, /^ {2}verdict +ok .*reverted_to=ver_/m);
    } finally {
      delete w.sc.handlers['env.snapshot'];
    }
  });

  test('a refused compose file or a missing one is one error line', async () => {
    const p = await project();
    writeFileSync(join(w.home, 'root.yaml'), AGENT_COMPOSE.replace('user: "1000:1000"', 'user: root'));
    assertFails(await w.run(['deploy', '--project', p.name, '-f', 'root.yaml']), 'must set a non-root user');
    assertFails(
      await w.run(['deploy', '--project', p.name, '-f', 'missing.yaml']),
      'cannot read compose file missing.yaml',
    );
    assertFails(await w.run(['deploy', '--project', 'no-such-project']), 'svc: ');
  });

  test('fork (server-named and --name), snapshot, rollback', async () => {
    const p = await project();
    const first = await w.run(['deploy', '--project', p.name]);
    assertExit(first, 0);
    const v1 = (await api(`/v1/deployments/${finalLine(first).id}`)).deployment.VersionID;

    const fork = await w.run(['fork', p.alpha]);
    assertExit(fork, 0);
    assert.deepEqual(phaseLines(fork), [
      ['place', 'ok'],
      ['clone', 'ok'],
      ['health', 'ok'],
      ['verdict', 'ok'],
    ]);
    const forkEnv = /^environment: (env_\S+)$/m.exec(fork.stdout)?.[1];
    assert.ok(forkEnv, fork.stdout);
    assert.equal((await api(`/v1/envs/${forkEnv}`)).environment.Name, 'alpha-fork-1');
    const named = await w.run(['fork', '--name', 'mine', `--version=${v1}`, p.alpha]);
    assertExit(named, 0);
    const namedEnv = /^environment: (env_\S+)$/m.exec(named.stdout)?.[1];
    assert.equal((await api(`/v1/envs/${namedEnv}`)).environment.Name, 'mine');

    const snap = await w.run(['snapshot', p.alpha]);
    assertExit(snap, 0);
    assert.deepEqual(
      phaseLines(snap).map((x) => x[0]),
      ['snapshot', 'health', 'verdict'],
    );
    const v2 = /^version: (ver_\S+)$/m.exec(snap.stdout)?.[1];
    assert.ok(v2 && v2 !== v1);

    const back = await w.run(['rollback', p.alpha, v1]);
    assertExit(back, 0);
    assert.deepEqual(
      phaseLines(back).map((x) => x[0]),
      ['restore', 'health', 'verdict'],
    );
    assert.equal((await api(`/v1/envs/${p.alpha}`)).environment.CurrentVersionID, v1);
    assertFails(await w.run(['rollback', p.alpha, 'ver_nope']), 'svc: ');

    const noWait = await w.run(['snapshot', '--wait=false', p.alpha]);
    assertExit(noWait, 0);
    assert.equal(JSON.parse(noWait.stdout).deployment.Kind, 'snapshot');
  });

  test('verify shows the reward in its last lines; --resume is sent', async () => {
    const p = await project();
    assertExit(await w.run(['deploy', '--project', p.name, '-f', 'agent.yaml']), 0);
    const r = await w.run(['verify', p.alpha]);
    assertExit(r, 0);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.at(-2), 'reward: 1 (source reward.txt)');
    assert.match(lines.at(-3) ?? '', /^ {2}verdict +ok .*reward=1 source=reward\.txt .*agent_frozen=true/);
    assert.deepEqual(
      phaseLines(r).map((x) => x[0]),
      ['stop', 'collect', 'snapshot', 'clone', 'grade', 'verdict'],
    );
    const resumed = await w.run(['verify', '--resume', p.alpha]);
    assertExit(resumed, 0);
    assert.match(resumed.stdout, /agent_frozen=false/);

    w.sc.handlers['verify.run'] = () => {
      throw new Error('grader crashed');
    };
    try {
      const failed = await w.run(['verify', p.alpha]);
      assertExit(failed, 1);
      assert.equal(failed.stdout.trimEnd().split('\n').at(-2), 'reward: none');
      assert.match(failed.stderr, /^svc: verify failed: grade: .*grader crashed/);
    } finally {
      delete w.sc.handlers['verify.run'];
    }
    const plain = await w.run(['deploy', '--project', p.name, '--env', 'noverifier']);
    assertExit(plain, 0);
    const env = (await api(`/v1/projects/${p.name}/envs`)).environments.find(
      (e: { Name: string }) => e.Name === 'noverifier',
    );
    assertFails(await w.run(['verify', env.ID]), 'svc: ');
  });

  test('deployment get is the API JSON; env destroy prints the 202 and does not wait', async () => {
    const p = await project();
    const d = await w.run(['deploy', '--project', p.name]);
    const { id } = finalLine(d);
    const got = await w.run(['deployment', 'get', id]);
    assertExit(got, 0);
    assert.equal(got.stdout, `${JSON.stringify(await api(`/v1/deployments/${id}`), null, 2)}\n`);
    const watch = await w.run(['deployment', 'watch', id]);
    assertExit(watch, 0);
    assert.deepEqual(phaseLines(watch), phaseLines(d));

    const gate = Promise.withResolvers<void>();
    w.sc.handlers['env.destroy'] = async (f) => {
      await gate.promise;
      return { destroyed: f.env_id };
    };
    try {
      const destroyed = await w.run(['env', 'destroy', p.alpha]);
      assertExit(destroyed, 0);
      const body = JSON.parse(destroyed.stdout);
      assert.deepEqual(Object.keys(body), ['deployment']);
      assert.equal(body.deployment.Kind, 'destroy');
      assert.equal(body.deployment.FinishedAt, null, 'returned while the host still holds the teardown');
      gate.resolve();
      const done = await w.run(['deployment', 'watch', body.deployment.ID]);
      assertExit(done, 0);
      assert.equal((await api(`/v1/envs/${p.alpha}`)).environment.Status, 'destroyed');
    } finally {
      gate.resolve();
      delete w.sc.handlers['env.destroy'];
    }
  });

  test('on a terminal the running phase is a live spinner line', { skip: !hasScript() }, async () => {
    const p = await project();
    w.sc.handlers['env.create'] = async () => {
      await new Promise((r) => setTimeout(r, 1500));
      return { endpoints: {}, started_in: 1500, digests: {}, storage: 'dir', egress: 'denied (verified)' };
    };
    try {
      const command = [process.execPath, SVC, 'deploy', '--project', p.name].map((a) => `'${a}'`).join(' ');
      // script(1) gives the CLI a pseudo-terminal as stdout.
      const env = { ...w.env, HOME: w.home, PATH: process.env.PATH ?? '' };
      const r = await spawnAsync('script', ['-qec', command, '/dev/null'], env, w.home);
      assert.equal(r.code, 0, r.out);
      assert.ok(r.out.includes('\r\x1b[2K'), 'redrawn with a carriage return');
      assert.match(r.out, /prepare running \d/);
      assert.match(r.out, /deployment dep_\S+: succeeded/);
    } finally {
      delete w.sc.handlers['env.create'];
    }
  });
});

function hasScript(): boolean {
  return spawnSync('script', ['--version'], { encoding: 'utf8' }).status === 0;
}

function spawnAsync(cmd: string, args: string[], env: Record<string, string>, cwd: string) {
  return new Promise<{ code: number; out: string }>((resolve) => {
    const child = spawn(cmd, args, { env, cwd });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('close', (code) => resolve({ code: code ?? -1, out }));
  });
}

describe('watching when the server goes away', () => {
  test('the poll failure is one line that says the deployment goes on', async () => {
    const w = await cliWorld('sqlite');
    writeFileSync(join(w.home, 'compose.yaml'), SIMPLE_COMPOSE);
    await w.t.req('POST', '/v1/projects', { body: { name: 'gone' } });
    const gate = Promise.withResolvers<void>();
    w.sc.handlers['env.create'] = async () => {
      await gate.promise;
      throw new Error('stopped');
    };
    let closing: Promise<void> | undefined;
    const r = await w.run(['deploy', '--project', 'gone'], {
      onStdout: (soFar) => {
        if (closing || !soFar.startsWith('deploy dep_')) return;
        closing = w.sc.close().then(() => {
          gate.resolve();
          return w.t.close();
        });
      },
    });
    await closing;
    assertFails(r, `svc: cannot reach ${w.t.url}: `);
    assert.match(r.stderr, /\(the deployment goes on: svc deployment watch dep_\S+\)\n$/);
    removeDir(w.home);
  });
});
