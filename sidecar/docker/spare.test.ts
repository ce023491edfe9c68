// Spare execs on real Docker, in busybox (ash) and Debian (dash) containers: a command
// run on a spare gets exactly what a plain Engine API exec gets (argv bytes, environment, exit
// code, stdout and stderr apart, end of input, Docker's refusal of a missing program), a killed
// spare is dropped and the exec still runs, a timeout kills the command, and only a caller that
// opts in (env.exec) ever takes a spare.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../shared/concurrency.ts';
import { BUSYBOX_IMAGE, ensureTestImages, PGREDIS_IMAGE } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { DockerEngine, dockerClient, EngineState, PROJECT_LABEL, SERVICE_LABEL } from './engine.ts';
import { ExecTimeout } from './errors.ts';
import { type ExecResult, execIn } from './exec.ts';
import { killSpare } from './testing.ts';

const RUN = randomBytes(4).toString('hex');
const docker = dockerClient();
const state = new EngineState();
const { spares } = state;

/** Every byte a shell could misread: quotes, expansions, newlines (trailing too), backslashes, unicode. */
const NASTY = [
  "it's",
  '"double" \'single\'',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: shell text a spare must not expand
  '$HOME ${PATH} `id` $(id) $1 $@ $$',
  'a\nb',
  'trailing\n\n',
  '\n',
  'back\\slash\\',
  '\\n \\0101 %s %b %%',
  'üñí 😀 ā ǈ \u0085',
  '',
  '-n',
  '--',
  '\r\t\x01\x1b\x7f',
  ' leading and trailing ',
  '*',
  '; exit 9',
];

interface Box {
  name: string;
  id: string;
  project: string;
}

async function box(label: string, image: string, env: string[], shell: boolean): Promise<Box> {
  const project = `svcspare${RUN}${label}`;
  const c = await docker.createContainer({
    name: `${project}-main`,
    Image: image,
    Entrypoint: shell ? [] : ['sleep'],
    Cmd: shell ? ['sleep', '3600'] : ['3600'],
    Env: env,
    Labels: { [PROJECT_LABEL]: project, [SERVICE_LABEL]: 'main', 'svc.test': RUN },
    HostConfig: { NetworkMode: 'none', Init: true },
  });
  await c.start();
  return { name: label, id: c.id, project };
}

const where = (b: Box) => ({ project: b.project, service: 'main', id: b.id });
const plain = (b: Box, cmd: string[]) => execIn(docker.getContainer(b.id), 'main', cmd);

/** Runs `cmd` on a fresh spare of the container; fails when the spare was not used. */
async function onSpare(b: Box, cmd: string[], timeoutSec?: number): Promise<ExecResult> {
  assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true, 'the spare came up');
  const spare = spares.get(b.id);
  const r = await spares.runOn(docker, where(b), cmd, { timeoutSec });
  assert.ok(r, 'the command ran on the spare');
  assert.equal(spare?.went, true);
  return r;
}

async function processes(b: Box): Promise<string[]> {
  const top = (await docker.getContainer(b.id).top({ ps_args: '-o pid,args' })) as { Processes: string[][] };
  return top.Processes.map((p) => p.join(' '));
}

describe('spare execs on real Docker', { skip: tier('docker'), timeout: 300_000 }, () => {
  const boxes: Box[] = [];
  before(async () => {
    await ensureTestImages({ postgres: true });
    // ash, with environment names the spare's own shell code and busybox's sh both set.
    boxes.push(await box('ash', BUSYBOX_IMAGE, ['SHLVL=5', 'svc_m=mine', 'PWD=/home', 'X=a\nb'], true));
    boxes.push(await box('dash', PGREDIS_IMAGE, [], false));
  });
  after(async () => {
    for (const b of boxes)
      await docker
        .getContainer(b.id)
        .remove({ force: true })
        .catch(() => {});
  });

  for (const [i, label] of ['ash', 'dash'].entries()) {
    const b = () => boxes[i];

    test(`${label}: every byte of the argv arrives as a plain exec gives it`, async () => {
      const cmd = ['/bin/sh', '-c', 'cat /proc/$$/cmdline; true', 'zero', ...NASTY];
      const viaSpare = await onSpare(b(), cmd);
      assert.deepEqual(viaSpare, await plain(b(), cmd));
      assert.equal(viaSpare.stdout, `${cmd.join('\0')}\0`);
    });

    test(`${label}: the environment is the plain exec's (no PWD or SHLVL from the shell)`, async () => {
      const sorted = (r: ExecResult) => r.stdout.split('\n').sort().join('\n');
      const viaSpare = await onSpare(b(), ['env']);
      const direct = await plain(b(), ['env']);
      assert.equal(sorted(viaSpare), sorted(direct));
      assert.equal(viaSpare.exit_code, 0);
      if (label === 'dash') assert.doesNotMatch(viaSpare.stdout, /^(PWD|SHLVL|svc_\w+)=/m);
      else
        for (const line of ['SHLVL=5', 'svc_m=mine', 'PWD=/home'])
          assert.match(viaSpare.stdout, new RegExp(`^${line}$`, 'm'));
    });

    test(`${label}: exit code, stdout and stderr apart, end of input at once`, async () => {
      const cmd = ['sh', '-c', 'printf out; printf err >&2; exit 7'];
      assert.deepEqual(await onSpare(b(), cmd), { exit_code: 7, stdout: 'out', stderr: 'err' });
      assert.deepEqual(await onSpare(b(), ['cat']), await plain(b(), ['cat']));
      assert.deepEqual(await onSpare(b(), ['cat']), { exit_code: 0, stdout: '', stderr: '' });
      // stderr is another pipe: its first bytes may reach the stream before the spare's GO byte.
      for (let n = 0; n < 10; n++)
        assert.deepEqual(await onSpare(b(), ['sh', '-c', 'printf err >&2; exit 4']), {
          exit_code: 4,
          stdout: '',
          stderr: 'err',
        });
    });

    test(`${label}: a missing or unrunnable program gets Docker's message and exit code`, async () => {
      for (const cmd of [
        ['nosuch-program'],
        ['/nosuch'],
        ['./nosuch'],
        ['nosuch/x'],
        ['/etc'],
        ['/etc/passwd'],
      ]) {
        const viaSpare = await onSpare(b(), cmd);
        assert.deepEqual(viaSpare, await plain(b(), cmd), cmd[0]);
        assert.equal(viaSpare.exit_code, 126);
      }
    });

    test(`${label}: a timeout kills the command and keeps its partial output`, async () => {
      const cmd = ['sh', '-c', `echo partial; sleep 1${i}77; echo never`];
      await assert.rejects(onSpare(b(), cmd, 1), (err: unknown) => {
        assert.ok(err instanceof ExecTimeout);
        assert.equal(err.stdout, 'partial\n');
        assert.equal(err.killed, true);
        return true;
      });
      for (let n = 0; n < 250 && (await processes(b())).some((p) => p.includes(`sleep 1${i}77`)); n++)
        await sleep(20);
      assert.ok(!(await processes(b())).some((p) => p.includes(`sleep 1${i}77`)), 'the command was killed');
    });

    test(`${label}: a killed spare is dropped and the exec still runs (plain)`, async () => {
      assert.equal(await spares.prepare(docker, b().project, 'main', b().id), true);
      const spare = spares.get(b().id);
      assert.ok(spare);
      await killSpare(spare);
      // At once, before the sidecar may have seen the stream end: either way the command runs once.
      const r = await new DockerEngine(b().project, docker, state).exec('main', ['echo', 'once'], {
        spare: true,
      });
      assert.deepEqual(r, { exit_code: 0, stdout: 'once\n', stderr: '' });
      assert.equal(spare.went, false);
      await spare.dropped;
      assert.notEqual(spares.get(b().id), spare);
    });
  }

  test('env.exec takes the spare and starts the next; callers that do not opt in never take it', async () => {
    const b = boxes[0];
    const engine = new DockerEngine(b.project, docker, state);
    await engine.containers(); // the last-listed hint, as after a thaw
    assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true);
    const first = spares.get(b.id);
    assert.deepEqual(await engine.exec('main', ['echo', 'x']), { exit_code: 0, stdout: 'x\n', stderr: '' });
    assert.equal(spares.get(b.id), first);
    assert.equal(first?.state, 'ready');
    assert.deepEqual(await engine.exec('main', ['echo', 'y'], { spare: true }), {
      exit_code: 0,
      stdout: 'y\n',
      stderr: '',
    });
    assert.equal(first?.went, true);
    const next = spares.get(b.id);
    assert.ok(next && next !== first, 'a new spare follows a used one');
    assert.equal(await next.ready, true);
    // A user, directory or environment of its own goes the plain way.
    await engine.exec('main', ['true'], { spare: true, user: '1000' });
    assert.equal(next.state, 'ready');
  });

  test('a spare is frozen with its container and used after the thaw', async () => {
    const b = boxes[1];
    const engine = new DockerEngine(b.project, docker, state);
    assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true);
    const spare = spares.get(b.id);
    await engine.pause();
    assert.equal(spares.take(b.id), null, 'not taken while frozen');
    await assert.rejects(engine.exec('main', ['true'], { spare: true }), /paused/);
    await engine.unpause();
    assert.deepEqual(await engine.exec('main', ['echo', 'thawed'], { spare: true }), {
      exit_code: 0,
      stdout: 'thawed\n',
      stderr: '',
    });
    assert.equal(spare?.went, true);
  });

  test('a pause right after an exec waits for the spare it left starting (Docker would deadlock)', async () => {
    const b = boxes[1];
    const engine = new DockerEngine(b.project, docker, state);
    for (let n = 0; n < 5; n++) {
      assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true);
      await engine.exec('main', ['true'], { spare: true }); // the next spare starts in the background
      await engine.pause();
      const next = spares.get(b.id);
      assert.notEqual(next?.state, 'starting', 'no spare is starting while the container is paused');
      assert.equal(spares.isFrozen(b.id), true);
      assert.equal(await spares.prepare(docker, b.project, 'main', b.id), false, 'none started while paused');
      await engine.unpause();
      assert.equal((await docker.getContainer(b.id).inspect()).State.Paused, false);
    }
  });

  test('a container whose environment a shell would change gets no spare', async () => {
    const b = await box('dots', BUSYBOX_IMAGE, ['A.B=1'], true);
    boxes.push(b);
    assert.equal(await spares.prepare(docker, b.project, 'main', b.id), false);
    const r = await new DockerEngine(b.project, docker, state).exec('main', ['env'], { spare: true });
    assert.match(r.stdout, /^A\.B=1$/m);
  });

  test("a container's first command leaves no spare; its second (plain) starts the next; destroy forgets", async () => {
    const b = await box('first', BUSYBOX_IMAGE, [], true);
    boxes.push(b);
    const engine = new DockerEngine(b.project, docker, state);
    await engine.containers();
    const exec = (word: string) => engine.exec('main', ['echo', word], { spare: true });
    const spareShells = async () => (await processes(b)).filter((p) => p.includes('svc_n=')).length;
    for (let round = 0; round < 2; round++) {
      assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true);
      const first = spares.get(b.id);
      assert.deepEqual(await exec('one'), { exit_code: 0, stdout: 'one\n', stderr: '' });
      assert.equal(first?.went, true, 'the first command ran on the spare');
      assert.equal(spares.get(b.id), undefined, 'and left none behind');
      for (let n = 0; n < 100 && (await spareShells()) > 0; n++) await sleep(20);
      assert.equal(await spareShells(), 0, 'no spare shell runs in the container');
      assert.deepEqual(await exec('two'), { exit_code: 0, stdout: 'two\n', stderr: '' });
      const next = spares.get(b.id);
      assert.ok(next, 'the second command (plain) starts the next spare');
      assert.equal(await next.ready, true);
      assert.deepEqual(await exec('three'), { exit_code: 0, stdout: 'three\n', stderr: '' });
      assert.equal(next.went, true);
      const after = spares.get(b.id);
      assert.ok(after && after !== next, 'from then on each used spare is followed by the next');
      assert.equal(await after.ready, true);
      // Destroy forgets the container: the same id would count as fresh again.
      spares.dropProject(b.project);
      await after.dropped;
    }
  });

  test('dropping a project ends its spare shells', async () => {
    const b = boxes[0];
    await spares.prepare(docker, b.project, 'main', b.id);
    const spare = spares.get(b.id);
    assert.ok((await processes(b)).some((p) => p.includes('svc_n=')));
    spares.dropProject(b.project);
    await spare?.dropped;
    assert.equal(spares.get(b.id), undefined);
    for (let n = 0; n < 250 && (await processes(b)).some((p) => p.includes('svc_n=')); n++) await sleep(20);
    assert.ok(!(await processes(b)).some((p) => p.includes('svc_n=')), 'the shell exited');
  });

  test('only env.exec and proc.start take spares: verify, health checks and checkpoints never name them', () => {
    const root = fileURLToPath(new URL('../', import.meta.url));
    const optIns: string[] = [];
    const takers: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) {
          const text = readFileSync(p, 'utf8');
          if (/spare: true/.test(text)) optIns.push(p.slice(root.length));
          if (/spares\.(take|runOn)\(/.test(text)) takers.push(p.slice(root.length));
          if (p.includes('/verify/')) assert.doesNotMatch(text, /spare/i, p);
        }
      }
    };
    walk(root);
    assert.deepEqual(optIns, ['handlers/io.ts']);
    // The env.exec path (engine.exec with the option) and the live processes' start.
    assert.deepEqual(takers.sort(), ['docker/engine.ts', 'processes/on-spare.ts']);
  });
});
