// The Docker floor of one svc lifecycle: the same engine work an image sandbox with egress deny
// asks of Docker, made raw through the Engine API by N concurrent workers, beside N concurrent
// `docker run --rm --network none <image> true`. Per lifecycle: container create (svc's init,
// limits, no-new-privileges, bounded json-file log, no network), start, one spare exec (`sh`
// reading stdin, as svcd keeps one ready), the user's exec of `true`, a second spare (svcd starts
// the next once the first is used), then remove with force. Whole-machine CPU per lifecycle from
// /proc/stat; what is left between this and svc's own lifecycle is svc's.
//   node bench/density/floor.ts [--n 50] [--rounds 2] [--split]
import { execFile } from 'node:child_process';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { BUSYBOX_IMAGE, ensureTestImages } from '../../test/support/images.ts';
import { machineCpu } from './measure.ts';

const { values } = parseArgs({
  options: {
    n: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '2' },
    // Also the lifecycle with one spare and with none: what each spare exec costs.
    split: { type: 'boolean', default: false },
  },
});
const N = Number(values.n);
const docker = new Docker();

async function execStart(c: Docker.Container, cmd: string[], stdin: boolean) {
  const x = await c.exec({ Cmd: cmd, AttachStdin: stdin, AttachStdout: true, AttachStderr: true });
  const stream = await x.start({ hijack: true, stdin });
  return { x, stream };
}

async function svcShaped(i: number, spares: number): Promise<void> {
  const c = await docker.createContainer({
    name: `floor-${process.pid}-${i}`,
    Image: BUSYBOX_IMAGE,
    Cmd: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done'],
    Labels: { 'svc.bench': 'floor' },
    HostConfig: {
      NetworkMode: 'none',
      Init: true,
      Memory: 4096 * 1024 * 1024,
      PidsLimit: 2048,
      NanoCpus: 2e9,
      SecurityOpt: ['no-new-privileges:true'],
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
    },
  });
  await c.start();
  await c.inspect();
  const spare = spares > 0 ? await execStart(c, ['sh'], true) : null;
  const run = await execStart(c, ['true'], false);
  await new Promise((r) => run.stream.on('end', r).resume());
  await run.x.inspect();
  const next = spares > 1 ? await execStart(c, ['sh'], true) : null;
  spare?.stream.destroy();
  next?.stream.destroy();
  await c.remove({ force: true });
}

function dockerRun(): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile('docker', ['run', '--rm', '--network', 'none', BUSYBOX_IMAGE, 'true'], (err) =>
      err ? reject(err) : resolve(),
    ),
  );
}

async function series(name: string, one: (i: number) => Promise<void>) {
  const load = (await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
  const m0 = machineCpu();
  const t0 = Date.now();
  const results = await Promise.allSettled(Array.from({ length: N }, (_, i) => one(i)));
  const wall = Date.now() - t0;
  const cpu = ((machineCpu() - m0) * 1000) / N;
  const failed = results.filter((r) => r.status === 'rejected').length;
  console.log(
    `| ${name} | ${N} | ${((N / wall) * 1000).toFixed(2)}/s | ${Math.round(cpu)} | ${failed} | ${load} |`,
  );
}

await ensureTestImages();
console.log('| what | N at once | per second | whole-machine CPU ms each | failed | load at start |');
console.log('|---|---|---|---|---|---|');
for (let r = 0; r < Number(values.rounds); r++) {
  await series('`docker run --rm --network none` (CLI)', () => dockerRun());
  await series("svc's Docker work, raw (Engine API)", (i) => svcShaped(i, 2));
  if (values.split) {
    await series('the same with only the first spare', (i) => svcShaped(i, 1));
    await series('the same without spares', (i) => svcShaped(i, 0));
  }
}
