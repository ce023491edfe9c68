// A live process's control messages in order on real Docker: svcd's runner gets input, resize,
// input, ... for one terminal back to back (as a host stream delivers them when the control plane
// does not wait for each answer, or when two control planes send), and each line typed after a
// resize must see that resize: input never overtakes the resize before it. A process that does
// not read its stdin holds its lane, and a signal still gets through.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Frame, frame } from '../../protocol/frames.ts';
import { decodeOutput } from '../../protocol/processes.ts';
import { DockerEngine, dockerClient, EngineState } from '../../sidecar/docker/engine.ts';
import { processHandlers } from '../../sidecar/handlers/processes.ts';
import { ProcessTable } from '../../sidecar/processes/table.ts';
import { Runner } from '../../sidecar/runner.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../support/images.ts';
import { tier } from '../support/tiers.ts';

const ENV = 'env_lane';
const T = { timeout: 90_000 };
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('process control lane on real Docker', { skip: tier('docker') }, () => {
  const project = `svc-lane-${process.pid}`;
  let container = '';
  let dir = '';
  let runner: Runner;
  const results = new Map<string, (f: Frame) => void>();
  let output = '';
  const ended = new Set<string>();
  let n = 0;

  const send = (kind: string, payload: unknown): Promise<Frame> => {
    const id = `cmd_lane${++n}`;
    const got = new Promise<Frame>((resolve) => results.set(id, resolve));
    void runner.handle(frame('command', { command_id: id, kind, env_id: ENV, payload }));
    return got;
  };
  const ok = async (f: Promise<Frame>) => {
    const r = await f;
    assert.equal(r.ok, true, String(r.error));
    return r.payload as Record<string, unknown>;
  };
  const until = async (match: () => boolean) => {
    while (!match()) await new Promise((r) => setTimeout(r, 20));
  };

  before(async () => {
    await ensureTestImages();
    container = execFileSync(
      'docker',
      [
        'run',
        '-d',
        '--rm',
        '--label',
        `com.docker.compose.project=${project}`,
        '--label',
        'com.docker.compose.service=app',
        BUSYBOX_IMAGE,
        'sleep',
        '3600',
      ],
      { encoding: 'utf8' },
    ).trim();
    dir = mkdtempSync(join(tmpdir(), 'svc-lane-'));
    const engine = new DockerEngine(project, dockerClient(), new EngineState());
    const table = new ProcessTable(
      () => engine,
      {
        send: (data) => {
          const f = decodeOutput(data);
          if (f.kind === 'stdout' || f.kind === 'stderr') output += f.data.toString('utf8');
          if (f.kind === 'end') ended.add(f.follow);
          return true;
        },
        buffered: () => 0,
      },
      () => {},
    );
    runner = new Runner(dir, processHandlers(table), (f) => {
      if (f.type === 'result') results.get(f.command_id as string)?.(f);
    });
  });
  after(() => {
    if (container) execFileSync('docker', ['rm', '-f', container], { stdio: 'ignore' });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('input, resize, input sent back to back: each line sees the resize sent before it', T, async () => {
    const { pid } = await ok(
      send('proc.start', {
        service: 'app',
        cmd: ['sh', '-c', 'while read l; do echo "=$l $(stty size)"; done'],
        stdin: true,
        tty: { rows: 24, cols: 80 },
      }),
    );
    await ok(send('proc.attach', { pid, follow: 'fol_lane1', since: 0 }));
    // All of it at once, nothing waited for: the order of arrival is the only order there is.
    const sent: Promise<Frame>[] = [send('proc.input', { pid, data: b64('start\n') })];
    const sizes: [number, number][] = [];
    for (let i = 1; i <= 12; i++) {
      const size: [number, number] = [20 + i, 60 + 3 * i];
      sizes.push(size);
      sent.push(send('proc.resize', { pid, rows: size[0], cols: size[1] }));
      sent.push(send('proc.input', { pid, data: b64(`line${i}\n`) }));
    }
    for (const r of sent) await ok(r);
    await until(() => output.includes('=line12 '));
    await until(() => /=line12 \d+ \d+/.test(output));
    for (let i = 1; i <= 12; i++) {
      const m = new RegExp(`=line${i} (\\d+) (\\d+)`).exec(output);
      assert.ok(m, `line${i} answered: ${output}`);
      // The shell may read a line after later resizes too, never before the one sent ahead of it.
      const seen = sizes.findIndex(([rows, cols]) => rows === Number(m[1]) && cols === Number(m[2]));
      assert.ok(seen >= i - 1, `line${i} sees ${m[1]} ${m[2]}, from before the resize sent ahead of it`);
    }
    await ok(send('proc.signal', { pid, signal: 'KILL' }));
    await until(() => ended.has('fol_lane1'));
  });

  test('a process that never reads its stdin holds its lane; a signal still ends it', T, async () => {
    const { pid } = await ok(
      send('proc.start', { service: 'app', cmd: ['sleep', '3600'], stdin: true, tty: null }),
    );
    await ok(send('proc.attach', { pid, follow: 'fol_lane2', since: 0 }));
    // Far more than the socket and the engine buffer: the later chunks wait in svcd.
    const chunk = b64('x'.repeat(48 * 1024));
    const inputs = Array.from({ length: 64 }, () => send('proc.input', { pid, data: chunk }));
    const killed = send('proc.signal', { pid, signal: 'KILL' });
    await ok(killed);
    await until(() => ended.has('fol_lane2'));
    // The inputs still waiting end with the process (answered, not left hanging).
    await Promise.all(inputs);
  });
});
