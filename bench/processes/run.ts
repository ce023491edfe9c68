// Live processes through the control plane, each figure beside a baseline measured in the same run.
// Real control plane (this process), real svcd, real Docker, a one-container busybox stack.
//
//   node bench/processes/run.ts [--runs 20] [--mib 100] [--drains 3] [--followers 1000]
//                               [--seconds 10] [--hz 10] [--only first,throughput,followers]
//
// first:      `echo hi`: POST /processes → first stdout event (SSE, and WebSocket), beside
//             `docker exec <ctr> echo hi` (CLI) → its first stdout byte, a raw Engine API exec →
//             first byte, and today's POST /exec (whole answer); interleaved, order rotating.
// throughput: a process printing --mib MiB (`head -c … /dev/zero`, held on stdin until the client
//             is attached) drained by one client in another process over SSE and over WebSocket,
//             beside `docker exec <ctr> head -c … /dev/zero | wc -c`; interleaved. The control
//             plane's RSS (this process; the clients live in bench/processes/clients.ts) and svcd's
//             are sampled every 50 ms.
// followers:  --followers WebSocket followers (50 per `cat` process: svcd allows 64 per process)
//             held by another process, which writes a timestamped line into every process --hz
//             times a second for --seconds; latency = input sent → line at each follower. Baseline:
//             the same with 1 follower of 1 process, before and after.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { WebSocket } from 'ws';
import { finished, IDLE_COMMAND, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    mib: { type: 'string', default: '100' },
    drains: { type: 'string', default: '3' },
    followers: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '10' },
    hz: { type: 'string', default: '10' },
    only: { type: 'string', default: 'first,throughput,followers' },
  },
});
const ONLY = new Set(values.only.split(','));
const RUNS = Math.max(1, Number(values.runs));
const BYTES = Math.round(Number(values.mib) * 1024 * 1024);
const CLIENTS = join(import.meta.dirname, 'clients.ts');
const MiB = 1024 * 1024;
const now = () => performance.timeOrigin + performance.now();
const load = () => loadavg()[0].toFixed(2);
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
const rssMiB = (pid: number | 'self') => {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};
/** CPU ms used so far by a process (utime + stime from /proc; `self` included). */
const cpuMs = (pid: number | 'self') => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(x[11]) + Number(x[12])) * 1000) / 100; // fields 14, 15 in clock ticks (USER_HZ 100)
};
const dockerd = Number(execFileSync('pidof', ['dockerd'], { encoding: 'utf8' }).trim().split(' ')[0]);
const out: string[] = [];
const report = (line = '') => {
  out.push(line);
  console.error(line);
};

await ensureTestImages();
const r = await startReal();
const { req, url, key } = r.t;
const docker = new Docker();
try {
  const p = await req('POST', '/v1/projects', { body: { name: 'bench-procs' } });
  const env = p.body.environments[0].ID as string;
  const stack = `services:\n  app:\n    image: ${BUSYBOX_IMAGE}\n    command: ${IDLE_COMMAND}\n`;
  const d = await finished(
    r.t,
    (await req('POST', '/v1/projects/bench-procs/deploy', { body: { compose: stack } })).body.deployment.ID,
  );
  if (d.deployment.Status !== 'succeeded') throw new Error(`deploy: ${d.deployment.Error}`);
  const ctr = execFileSync(
    'docker',
    [
      'ps',
      '-q',
      '--filter',
      `label=com.docker.compose.project=${env.toLowerCase()}`,
      '--filter',
      'label=com.docker.compose.service=app',
    ],
    { encoding: 'utf8' },
  ).trim();
  if (!ctr) throw new Error('no container for the stack');
  const container = docker.getContainer(ctr);
  const start = async (body: object): Promise<string> => {
    const s = await req('POST', `/v1/envs/${env}/processes`, { body: { service: 'app', ...body } });
    if (s.status !== 202) throw new Error(`start: ${s.status} ${JSON.stringify(s.body)}`);
    return s.body.pid as string;
  };
  const input = async (pid: string, text: string) => {
    const x = await req('POST', `/v1/envs/${env}/processes/${pid}/input`, {
      body: { data: Buffer.from(text).toString('base64') },
    });
    if (x.status !== 204) throw new Error(`input: ${x.status} ${JSON.stringify(x.body)}`);
  };

  if (ONLY.has('first')) await firstByte();
  if (ONLY.has('throughput')) await throughput();
  if (ONLY.has('followers')) await followers();

  async function firstByte(): Promise<void> {
    /** Resolves with [202 answered, first stdout event] times after t0, once the process ended. */
    const viaSse = async (): Promise<number[]> => {
      const t0 = now();
      const pid = await start({ cmd: ['echo', 'hi'] });
      const t1 = now();
      const s = await fetch(`${url}/v1/envs/${env}/processes/${pid}/stream`, {
        headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
      });
      let first = 0;
      let text = '';
      for await (const chunk of s.body as unknown as AsyncIterable<Uint8Array>) {
        text += Buffer.from(chunk).toString('utf8');
        if (!first && text.includes('"type":"stdout"')) first = now();
        if (text.includes('"type":"end"')) break;
      }
      if (!first) throw new Error(`no stdout: ${text}`);
      return [t1 - t0, first - t0];
    };
    const viaWs = async (): Promise<number[]> => {
      const t0 = now();
      const pid = await start({ cmd: ['echo', 'hi'] });
      const t1 = now();
      const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/envs/${env}/processes/${pid}/stream`, {
        headers: { authorization: `Bearer ${key}` },
      });
      let first = 0;
      await new Promise<void>((resolve, reject) => {
        ws.on('message', (m) => {
          const t = m.toString();
          if (!first && t.startsWith('{"type":"stdout"')) first = now();
          if (t.includes('"type":"end"')) ws.close();
        });
        ws.on('close', () => resolve());
        ws.on('error', reject);
      });
      if (!first) throw new Error('no stdout over the WebSocket');
      return [t1 - t0, first - t0];
    };
    const cli = (): Promise<number[]> =>
      new Promise((resolve, reject) => {
        const t0 = now();
        let first = 0;
        const c = spawn('docker', ['exec', ctr, 'echo', 'hi'], { stdio: ['ignore', 'pipe', 'inherit'] });
        c.stdout.on('data', () => {
          if (!first) first = now();
        });
        c.on('error', reject);
        c.on('close', (code) =>
          code === 0 && first ? resolve([NaN, first - t0]) : reject(new Error(`docker exec: ${code}`)),
        );
      });
    const raw = async (): Promise<number[]> => {
      const t0 = now();
      const x = await container.exec({ Cmd: ['echo', 'hi'], AttachStdout: true, AttachStderr: true });
      const stream = (await x.start({ hijack: true, stdin: false })) as NodeJS.ReadableStream;
      let first = 0;
      await new Promise<void>((resolve, reject) => {
        stream.on('data', () => {
          if (!first) first = now();
        });
        stream.on('end', resolve);
        stream.on('error', reject);
      });
      await x.inspect();
      return [NaN, first - t0];
    };
    const execRoute = async (): Promise<number[]> => {
      const t0 = now();
      const x = await req('POST', `/v1/envs/${env}/exec`, { body: { service: 'app', cmd: ['echo', 'hi'] } });
      if (x.status !== 200 || x.body.stdout !== 'hi\n') throw new Error(`exec: ${JSON.stringify(x.body)}`);
      return [NaN, now() - t0];
    };
    const paths: [string, () => Promise<number[]>][] = [
      ['API: POST /processes → first stdout event (SSE)', viaSse],
      ['API: POST /processes → first stdout event (WebSocket)', viaWs],
      ['baseline: `docker exec` CLI → first stdout byte', cli],
      ['raw Engine API exec → first stdout byte', raw],
      ["today's POST /exec (whole answer)", execRoute],
    ];
    for (const [, fn] of paths) await fn(); // warm-up: connections, the engine's caches
    const ms = paths.map(() => [] as number[]);
    const accepted = paths.map(() => [] as number[]);
    const loads: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      loads.push(load());
      for (let k = 0; k < paths.length; k++) {
        const j = (i + k) % paths.length;
        await new Promise((res) => setTimeout(res, 300)); // what the last path left running (a spare exec) settles
        const [a, f] = await paths[j][1]();
        ms[j].push(f);
        if (Number.isFinite(a)) accepted[j].push(a);
      }
    }
    report(
      `\n### first output byte of \`echo hi\`, ${RUNS} rounds, paths interleaved (order rotating); 1-min load at each round: ${loads.join(', ')}\n`,
    );
    report('| path | p50 ms | p99 ms | of which: 202 answered (p50) |\n|---|---|---|---|');
    for (const [j, [name]] of paths.entries())
      report(
        `| ${name} | ${pct(ms[j], 50).toFixed(1)} | ${pct(ms[j], 99).toFixed(1)} | ${accepted[j].length ? pct(accepted[j], 50).toFixed(1) : ''} |`,
      );
    const base = pct(ms[2], 50);
    report(
      `\nAPI ÷ docker exec (p50s): SSE ${(pct(ms[0], 50) / base).toFixed(2)}x, WebSocket ${(pct(ms[1], 50) / base).toFixed(2)}x; p99s: SSE ${(pct(ms[0], 99) / pct(ms[2], 99)).toFixed(2)}x, WebSocket ${(pct(ms[1], 99) / pct(ms[2], 99)).toFixed(2)}x`,
    );
  }

  async function throughput(): Promise<void> {
    const rows: string[] = [];
    const drain = async (via: 'sse' | 'ws') => {
      const pid = await start({ cmd: ['sh', '-c', `read go; head -c ${BYTES} /dev/zero`], stdin: true });
      const c = spawn(process.execPath, [CLIENTS, 'drain', url, key, env, pid, via], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const lines = createInterface({ input: c.stdout })[Symbol.asyncIterator]();
      const ready = JSON.parse((await lines.next()).value ?? '{}');
      if (!ready.ready) throw new Error(`client: ${JSON.stringify(ready)}`);
      await new Promise((res) => setTimeout(res, 300)); // the attach settles; the process waits on stdin
      const rss = { before: rssMiB('self'), max: 0, svcdBefore: rssMiB(r.sidecar.pid ?? 0), svcdMax: 0 };
      const sampler = setInterval(() => {
        rss.max = Math.max(rss.max, rssMiB('self'));
        rss.svcdMax = Math.max(rss.svcdMax, rssMiB(r.sidecar.pid ?? 0));
      }, 50);
      const cpu0 = [cpuMs('self'), cpuMs(r.sidecar.pid ?? 0), cpuMs(dockerd)];
      const t0 = now();
      await input(pid, 'go\n');
      const res = JSON.parse((await lines.next()).value ?? '{}');
      clearInterval(sampler);
      await exited(c);
      if (res.error) throw new Error(`client: ${res.error}`);
      const secs = (res.end - t0) / 1000;
      const after = rssMiB('self');
      const mib = BYTES / MiB;
      const cpu = [cpuMs('self'), cpuMs(r.sidecar.pid ?? 0), cpuMs(dockerd)].map((c, i) =>
        ((c - cpu0[i]) / mib).toFixed(1),
      );
      rows.push(
        `| ${via === 'sse' ? 'API, SSE' : 'API, WebSocket'} | ${load()} | ${(res.bytes / MiB).toFixed(1)} | ${res.gaps} | ${(secs * 1000).toFixed(0)} | **${(res.bytes / MiB / secs).toFixed(1)}** | ${rss.before.toFixed(0)} → max ${rss.max.toFixed(0)} → ${after.toFixed(0)} | ${rss.svcdBefore.toFixed(0)} → max ${rss.svcdMax.toFixed(0)} | ${cpu[0]}, ${cpu[1]}, ${(res.cpuMs / mib).toFixed(1)}, ${cpu[2]} |`,
      );
      console.error(rows.at(-1));
    };
    const baseline = async () => {
      const c0 = cpuMs(dockerd);
      const t0 = now();
      const n = await new Promise<number>((resolve, reject) =>
        execFile('sh', ['-c', `docker exec ${ctr} head -c ${BYTES} /dev/zero | wc -c`], (err, o) =>
          err ? reject(err) : resolve(Number(o.trim())),
        ),
      );
      const secs = (now() - t0) / 1000;
      rows.push(
        `| baseline: \`docker exec … \\| wc -c\` | ${load()} | ${(n / MiB).toFixed(1)} | | ${(secs * 1000).toFixed(0)} | ${(n / MiB / secs).toFixed(1)} | | | dockerd ${((cpuMs(dockerd) - c0) / (n / MiB)).toFixed(1)} |`,
      );
      console.error(rows.at(-1));
    };
    await baseline(); // warm-up, not reported
    rows.length = 0;
    for (let i = 0; i < Number(values.drains); i++) {
      const order = [() => drain('sse'), () => drain('ws'), baseline];
      for (let k = 0; k < order.length; k++) await order[(i + k) % order.length]();
    }
    report(`\n### ${values.mib} MiB printed by one process, drained by one client; interleaved\n`);
    report(
      '| path | load | MiB received | gap events | ms (input sent → end event) | MiB/s | control-plane RSS MiB | svcd RSS MiB | CPU ms per MiB: control plane, svcd, client, dockerd |\n|---|---|---|---|---|---|---|---|---|',
    );
    for (const row of rows) report(row);
    await new Promise((res) => setTimeout(res, 5000));
    report(
      `\nafter 5 s idle: control plane RSS ${rssMiB('self').toFixed(0)} MiB, svcd RSS ${rssMiB(r.sidecar.pid ?? 0).toFixed(0)} MiB`,
    );
  }

  async function followers(): Promise<void> {
    const F = Math.max(1, Number(values.followers));
    const rows: string[] = [];
    const round = async (n: number) => {
      const procs = Math.ceil(n / 50);
      const pids = await Promise.all(
        Array.from({ length: procs }, () => start({ cmd: ['cat'], stdin: true })),
      );
      const idle = rssMiB('self');
      const c = spawn(
        process.execPath,
        [CLIENTS, 'follow', url, key, env, pids.join(','), String(n), values.seconds, values.hz],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const lines = createInterface({ input: c.stdout })[Symbol.asyncIterator]();
      const attachedAt = now();
      const ready = JSON.parse((await lines.next()).value ?? '{}');
      if (!ready.ready) throw new Error(`clients: ${JSON.stringify(ready)}`);
      const attachS = (now() - attachedAt) / 1000;
      const held = rssMiB('self');
      let max = held;
      const sampler = setInterval(() => (max = Math.max(max, rssMiB('self'))), 100);
      const res = JSON.parse((await lines.next()).value ?? '{}');
      clearInterval(sampler);
      await exited(c);
      if (res.error) throw new Error(`clients: ${res.error}`);
      await Promise.all(
        pids.map((pid) =>
          req('POST', `/v1/envs/${env}/processes/${pid}/signal`, { body: { signal: 'KILL' } }),
        ),
      );
      await new Promise((res) => setTimeout(res, 1000));
      rows.push(
        `| ${n} on ${procs} process${procs > 1 ? 'es' : ''} | ${load()} | ${attachS.toFixed(1)} s | ${res.lines}/${res.expected} | ${res.gaps} | ${res.p50.toFixed(1)} | **${res.p99.toFixed(1)}** | ${res.max.toFixed(1)} | ${idle.toFixed(0)} → ${held.toFixed(0)} (max ${max.toFixed(0)}) → ${rssMiB('self').toFixed(0)} |`,
      );
      console.error(rows.at(-1));
    };
    await round(1);
    await round(F);
    await round(1);
    await round(F);
    report(
      `\n### attached followers, a line into every process ${values.hz}x/s for ${values.seconds} s; rounds in this order\n`,
    );
    report(
      '| followers | load | all attached in | lines received / expected | gap events | p50 ms | p99 ms | max ms | control-plane RSS MiB: before → attached (max while following) → after |\n|---|---|---|---|---|---|---|---|---|',
    );
    for (const row of rows) report(row);
  }
} finally {
  await r.close().catch((err) => console.error(`cleanup: ${err.message}`));
}
console.log(out.join('\n'));
process.exit(0);

function exited(c: ChildProcess): Promise<void> {
  return new Promise((resolve) => (c.exitCode !== null ? resolve() : c.once('exit', () => resolve())));
}
