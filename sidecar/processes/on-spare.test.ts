// Live processes on spare execs, on real Docker in busybox (ash) and Debian (dash, bash) containers:
// a start on a container with a ready spare runs on it and gets what a plain start gets (stdout and
// stderr apart, exit code, directory, variables, the environment, stdin, list and re-attach), a
// signal reaches the command, a start the spare cannot serve runs plain and leaves the spare, the
// next spare follows a used one, a directory the shell cannot enter gets Docker's own refusal, and
// a spare that died before its line ran leaves the command to run once, plainly.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Payloads } from '../../protocol/commands.ts';
import { decodeOutput, type ProcessEnd } from '../../protocol/processes.ts';
import { sleep } from '../../shared/concurrency.ts';
import { BUSYBOX_IMAGE, ensureTestImages, PGREDIS_IMAGE } from '../../test/support/images.ts';
import { tier } from '../../test/support/tiers.ts';
import { DockerEngine, dockerClient, EngineState, PROJECT_LABEL, SERVICE_LABEL } from '../docker/engine.ts';
import type { Spare } from '../docker/spare.ts';
import { killSpare } from '../docker/testing.ts';
import { ProcessTable } from './table.ts';

const RUN = randomBytes(4).toString('hex');
const docker = dockerClient();
const state = new EngineState();
const { spares } = state;

interface Box {
  id: string;
  project: string;
  engine: DockerEngine;
}

/** What one follower got. */
interface Seen {
  stdout: string;
  stderr: string;
  end?: ProcessEnd;
  done: Promise<ProcessEnd>;
  finish: (e: ProcessEnd) => void;
}
const followers = new Map<string, Seen>();
let n = 0;

const table = new ProcessTable(
  (envId) => {
    const b = boxes.find((x) => x.project === envId);
    if (!b) throw new Error(`no box ${envId}`);
    return b.engine;
  },
  {
    send: (data) => {
      const f = decodeOutput(data);
      const seen = followers.get(f.follow);
      if (!seen) return true;
      if (f.kind === 'stdout' || f.kind === 'stderr') seen[f.kind] += f.data.toString('utf8');
      if (f.kind === 'end') {
        seen.end = f.end;
        seen.finish(f.end);
      }
      return true;
    },
    buffered: () => 0,
  },
  () => {},
);
const boxes: Box[] = [];

async function box(label: string, image: string): Promise<Box> {
  const project = `svcspareproc${RUN}${label}`;
  const c = await docker.createContainer({
    name: `${project}-main`,
    Image: image,
    Entrypoint: ['sleep'],
    Cmd: ['3600'],
    Env: ['FROM_IMAGE=yes'],
    Labels: { [PROJECT_LABEL]: project, [SERVICE_LABEL]: 'main', 'svc.test': RUN },
    HostConfig: { NetworkMode: 'none', Init: true },
  });
  await c.start();
  const b = { id: c.id, project, engine: new DockerEngine(project, docker, state) };
  boxes.push(b);
  await b.engine.containers(); // the last-listed hint, as after a thaw
  return b;
}

const start = (b: Box, o: Partial<Payloads['proc.start']>) =>
  table.start(b.project, {
    service: 'main',
    cmd: ['true'],
    env: {},
    cwd: '',
    user: '',
    stdin: false,
    tty: null,
    ...o,
  });

function follow(b: Box, pid: string, since = 0): Seen {
  let finish: (e: ProcessEnd) => void = () => {};
  const done = new Promise<ProcessEnd>((r) => (finish = r));
  const seen: Seen = { stdout: '', stderr: '', done, finish };
  const id = `fol_${++n}`;
  followers.set(id, seen);
  table.attach(b.project, { pid, follow: id, since });
  return seen;
}

/** Starts `o` and follows it to its end. */
async function run(b: Box, o: Partial<Payloads['proc.start']>) {
  const { pid } = await start(b, o);
  const seen = follow(b, pid);
  await seen.done;
  return { pid, stdout: seen.stdout, stderr: seen.stderr, end: seen.end };
}

/** A ready spare in the box's container. */
async function readySpare(b: Box): Promise<Spare> {
  assert.equal(await spares.prepare(docker, b.project, 'main', b.id), true, 'the spare came up');
  const s = spares.get(b.id);
  assert.ok(s);
  return s;
}

/** Runs `o` once on a spare and once plainly (spares off); both must have used the way asked for. */
async function bothWays(b: Box, o: Partial<Payloads['proc.start']>) {
  const spare = await readySpare(b);
  const viaSpare = await run(b, o);
  assert.ok(spare.went || spare.declined, 'the spare took the line');
  spares.enabled = false;
  try {
    const plain = await run(b, o);
    return { viaSpare, plain };
  } finally {
    spares.enabled = true;
  }
}

/** Waits (bounded) for a spare other than `used` to be ready in the box's container. */
async function nextSpare(b: Box, used: Spare): Promise<Spare | undefined> {
  for (let i = 0; i < 500; i++) {
    const s = spares.get(b.id);
    if (s && s !== used && (await s.ready)) return s;
    await sleep(20);
  }
  return undefined;
}

describe('live processes on spare execs', { skip: tier('docker'), timeout: 300_000 }, () => {
  before(async () => {
    await ensureTestImages({ postgres: true });
    await box('ash', BUSYBOX_IMAGE);
    await box('dash', PGREDIS_IMAGE);
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

    test(`${label}: output, stderr apart, exit code, directory and variables as a plain start`, async () => {
      const o = {
        cmd: [
          'sh',
          '-c',
          'echo out; echo err >&2; pwd; printf "%s|" "$X" "$PATH" "$FROM_IMAGE" "$1"; exit 3',
          'zero',
          "a'b",
        ],
        cwd: '/etc/../tmp',
        env: { X: "it's $HOME\nnext", PATH: '/bin:/usr/bin' },
      };
      const { viaSpare, plain } = await bothWays(b(), o);
      assert.equal(viaSpare.stdout, `out\n/tmp\nit's $HOME\nnext|/bin:/usr/bin|yes|a'b|`);
      assert.equal(viaSpare.stderr, 'err\n');
      assert.deepEqual(viaSpare.end, { exit_code: 3 });
      assert.deepEqual({ ...viaSpare, pid: '' }, { ...plain, pid: '' });
    });

    test(`${label}: the environment is a plain start's`, async () => {
      const sorted = (s: string) => s.split('\n').sort().join('\n');
      const { viaSpare, plain } = await bothWays(b(), { cmd: ['env'], env: { SHLVL: '9', Y: 'y' } });
      assert.equal(sorted(viaSpare.stdout), sorted(plain.stdout));
      assert.match(viaSpare.stdout, /^SHLVL=9$/m);
      assert.doesNotMatch(viaSpare.stdout, /^(PWD|svc_\w+)=/m);
    });

    test(`${label}: a missing program and a directory the shell cannot enter get Docker's refusal`, async () => {
      for (const o of [
        { cmd: ['nosuch'] },
        { cmd: ['pwd'], cwd: '/nosuch' },
        { cmd: ['pwd'], cwd: '/etc/passwd' },
      ]) {
        const { viaSpare, plain } = await bothWays(b(), o);
        assert.deepEqual({ ...viaSpare, pid: '' }, { ...plain, pid: '' }, JSON.stringify(o));
        assert.equal(viaSpare.end?.exit_code, 126);
      }
    });

    test(`${label}: TERM reaches the command (its pid is the spare's)`, async () => {
      const spare = await readySpare(b());
      const shell = await spare.pid();
      const { pid } = await start(b(), { cmd: ['sleep', '100'] });
      assert.equal(spare.went, true);
      const seen = follow(b(), pid);
      // The start answers once the spare's shell took the line; its `exec` follows a moment later.
      const replaced = async () => {
        const top = (await docker.getContainer(b().id).top({ ps_args: '-o pid,args' })) as {
          Processes: string[][];
        };
        return top.Processes.some((p) => p.join(' ').includes('sleep 100'));
      };
      let seenSleep = false;
      for (let i = 0; i < 100 && !seenSleep; i++) seenSleep = (await replaced()) || (await sleep(50), false);
      assert.ok(seenSleep, 'the command replaced the shell');
      assert.ok(shell > 0);
      await table.signal(b().project, { pid, signal: 'TERM' });
      assert.deepEqual(await seen.done, { exit_code: 143, signal: 'TERM' });
      assert.equal(table.list(b().project, pid)[0].signal, 'TERM');
    });

    test(`${label}: stdin reaches the command; list and re-attach as for a plain start`, async () => {
      const spare = await readySpare(b());
      const { pid } = await start(b(), { cmd: ['sh', '-c', 'cat; echo done'], stdin: true });
      assert.equal(spare.went, true);
      const seen = follow(b(), pid);
      const b64 = (s: string) => Buffer.from(s).toString('base64');
      const never = new Promise<void>(() => {});
      await table.input(b().project, { pid, data: b64('line one\n'), close: false }, never);
      await table.input(b().project, { pid, data: b64('two'), close: true }, never);
      assert.deepEqual(await seen.done, { exit_code: 0 });
      assert.equal(seen.stdout, 'line one\ntwodone\n');
      const [info] = table.list(b().project, pid);
      assert.equal(info.status, 'exited');
      assert.equal(info.stdin, true);
      const again = follow(b(), pid, 0);
      await again.done;
      assert.equal(again.stdout, 'line one\ntwodone\n');
    });

    test(`${label}: a terminal, another user or a relative directory runs plain and leaves the spare`, async () => {
      const spare = await readySpare(b());
      const tty = await run(b(), {
        cmd: ['sh', '-c', '[ -t 1 ] && echo terminal'],
        tty: { rows: 30, cols: 90 },
      });
      assert.equal(tty.stdout.trim(), 'terminal');
      const other = await run(b(), { cmd: ['id', '-u'], user: '1000' });
      assert.equal(other.stdout, '1000\n');
      const rel = await run(b(), { cmd: ['pwd'], cwd: 'tmp' });
      assert.equal(rel.end?.exit_code, 126);
      assert.equal(spares.get(b().id), spare);
      assert.equal(spare.state, 'ready');
      assert.equal(spare.went, false);
    });

    test(`${label}: a used spare is replaced`, async () => {
      const spare = await readySpare(b());
      const { end } = await run(b(), { cmd: ['true'] });
      assert.deepEqual(end, { exit_code: 0 });
      assert.equal(spare.went, true);
      assert.ok(await nextSpare(b(), spare), 'a new spare follows the used one');
    });

    test(`${label}: a spare killed before its line ran: the command runs once, plainly`, async () => {
      const spare = await readySpare(b());
      await killSpare(spare);
      // At once, before svcd may have seen the stream end: either way the command runs once.
      const mark = `/tmp/once-${RUN}-${label}`;
      const r = await run(b(), { cmd: ['sh', '-c', `echo ran >> ${mark}; cat ${mark}`] });
      assert.deepEqual(r.end, { exit_code: 0 });
      assert.equal(r.stdout, 'ran\n');
      assert.equal(spare.went, false);
      await spare.dropped;
    });
  }

  test('the SDK shape (`/bin/bash -l -c`, no user, variables) runs on the spare', async () => {
    const b = boxes[1];
    const { viaSpare, plain } = await bothWays(b, {
      cmd: ['/bin/bash', '-l', '-c', 'echo "$0 $X $(pwd)"'],
      env: { X: 'x' },
      cwd: '/root',
    });
    assert.equal(viaSpare.stdout, '/bin/bash x /root\n');
    assert.deepEqual({ ...viaSpare, pid: '' }, { ...plain, pid: '' });
  });

  test('a container whose default user is named takes the spare for that user only', async () => {
    const project = `svcspareproc${RUN}user`;
    const c = await docker.createContainer({
      name: `${project}-main`,
      Image: BUSYBOX_IMAGE,
      Entrypoint: ['sleep'],
      Cmd: ['3600'],
      User: '1000',
      Labels: { [PROJECT_LABEL]: project, [SERVICE_LABEL]: 'main', 'svc.test': RUN },
      HostConfig: { NetworkMode: 'none', Init: true },
    });
    await c.start();
    const b = { id: c.id, project, engine: new DockerEngine(project, docker, state) };
    boxes.push(b);
    await b.engine.containers();
    let spare = await readySpare(b);
    assert.equal((await run(b, { cmd: ['id', '-u'], user: '0' })).stdout, '0\n');
    assert.equal(spare.went, false, 'root is not the default user: plain');
    assert.equal((await run(b, { cmd: ['id', '-u'], user: '1000' })).stdout, '1000\n');
    assert.equal(spare.went, true);
    spare = (await nextSpare(b, spare)) as Spare;
    assert.equal((await run(b, { cmd: ['id', '-u'] })).stdout, '1000\n');
    assert.equal(spare.went, true);
  });
});
