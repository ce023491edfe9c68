// runc against gVisor in one run, through the API of a real control plane and a real svcd on real
// Docker: image sandbox create → first exec, the exec round trip, a fork of a snapshot of a
// one-service stack, a CPU-bound and a syscall-heavy workload (both timed inside the container, so
// the API's own cost is not in them). The load average is printed beside each series: the figures
// mean little on a loaded machine without it.
//
//   node bench/runtime/compare.ts [--runs 5]
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { finished, startReal } from '../../test/e2e/real.ts';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' } } });
const RUNS = Math.max(1, Number(values.runs));
const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const load = () =>
  loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
const fmt = (xs: number[]) => `p50 ${p50(xs).toFixed(0)} ms (${xs.map((x) => x.toFixed(0)).join(', ')})`;

// Each workload prints its own milliseconds (busybox date has no sub-second: /proc/uptime does).
const timed = (body: string) =>
  `a=$(cut -d' ' -f1 /proc/uptime); ${body}; b=$(cut -d' ' -f1 /proc/uptime); echo "$a $b" | awk '{print ($2-$1)*1000}'`;
const WORKLOADS = {
  cpu: timed('i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'),
  syscalls: timed('dd if=/dev/zero of=/dev/null bs=1 count=200000 2>/dev/null'),
  files: timed(
    'mkdir -p /work/x && cd /work/x && i=0; while [ $i -lt 2000 ]; do : > f$i; i=$((i+1)); done; cd / && rm -rf /work/x',
  ),
};

await ensureTestImages();
const r = await startReal();
try {
  const req = r.t.req;
  const exec = async (env: string, cmd: string[]) => {
    const x = await req('POST', `/v1/envs/${env}/exec`, { body: { service: 'main', cmd } });
    if (x.status !== 200 || x.body.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(x.body)}`);
    return x.body.stdout as string;
  };
  for (const runtime of ['runc', 'gvisor'] as const) {
    const out: Record<string, number[]> = {
      create: [],
      exec: [],
      fork: [],
      cpu: [],
      syscalls: [],
      files: [],
    };
    const envs: string[] = [];
    console.log(`\n== ${runtime} (load before: ${load()})`);
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const c = await req('POST', '/v1/sandboxes', {
        body: { image: BUSYBOX_IMAGE, runtime, cmd: ['sleep', '3600'] },
      });
      if (c.status !== 201) throw new Error(`sandbox: ${c.status} ${JSON.stringify(c.body).slice(0, 400)}`);
      await exec(c.body.environment.ID, ['true']);
      out.create.push(performance.now() - t0);
      envs.push(c.body.environment.ID);
    }
    console.log(`create → first exec: ${fmt(out.create)}  load ${load()}`);
    const env = envs[0];
    for (let i = 0; i < RUNS * 10; i++) {
      const t0 = performance.now();
      await exec(env, ['true']);
      out.exec.push(performance.now() - t0);
    }
    console.log(`exec round trip: ${fmt(out.exec)}  load ${load()}`);
    const s = await req('POST', `/v1/envs/${env}/snapshot`);
    const snap = await finished(r.t, s.body.deployment.ID);
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const f = await req('POST', `/v1/envs/${env}/fork`, { body: { version: snap.deployment.VersionID } });
      const done = await finished(r.t, f.body.deployment.ID);
      if (done.deployment.Status !== 'succeeded') throw new Error(`fork: ${done.deployment.Error}`);
      await exec(done.deployment.EnvID, ['true']);
      out.fork.push(performance.now() - t0);
      envs.push(done.deployment.EnvID);
    }
    console.log(`fork of a snapshot → first exec: ${fmt(out.fork)}  load ${load()}`);
    for (const [name, script] of Object.entries(WORKLOADS)) {
      for (let i = 0; i < RUNS; i++) out[name].push(Number((await exec(env, ['sh', '-c', script])).trim()));
      console.log(`${name} (timed inside): ${fmt(out[name])}  load ${load()}`);
    }
    for (const e of envs) await finished(r.t, (await req('DELETE', `/v1/envs/${e}`)).body.deployment.ID);
  }
} finally {
  await r.close();
}
