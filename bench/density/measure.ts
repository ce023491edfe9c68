// Helpers of the density benchmark: an HTTP client whose timeouts are the benchmark's own deadline
// (fetch's undici gives up on a response after 300 s of waiting for headers, which a user running
// 200 sandboxes on one host would not), CPU accounting of the processes a lifecycle costs, and the
// leak check (containers, networks, volumes, firewall rules, datasets, loop devices).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';

export interface Res {
  status: number;
  body: any;
}

/** One JSON request that waits as long as `timeoutMs` (socket idle included), no longer. */
export function call(
  base: string,
  key: string,
  method: string,
  path: string,
  body: unknown,
  timeoutMs: number,
): Promise<Res> {
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, base),
      {
        method,
        timeout: timeoutMs,
        headers: {
          authorization: `Bearer ${key}`,
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = text ? JSON.parse(text) : text;
          } catch {}
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within the bench deadline (${timeoutMs} ms)`)));
    req.on('error', reject);
    req.end(data);
  });
}

/** user+system CPU seconds of a process (and, with `children`, of its waited-for children). */
function cpuOf(pid: number, children: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields after the name start at state (3): utime 14, stime 15, cutime 16, cstime 17
    const ticks = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0);
    return ticks / 100;
  } catch {
    return 0;
  }
}

function pidsOf(name: string): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === name) out.push(Number(d));
    } catch {}
  }
  return out;
}

export interface CpuSample {
  controlPlane: number;
  svcd: number;
  svcdChildren: number;
  dockerd: number;
  containerd: number;
  /** Busy CPU seconds of the whole machine (every process, the kernel's own work included). */
  machine: number;
  load: string;
}

/** Busy CPU seconds of the whole machine so far (/proc/stat: all but idle and iowait). */
export function machineCpu(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return (total - f[3] - f[4]) / 100;
}

/** CPU seconds so far: the control plane (this process), svcd, its children, the engine. */
export function sampleCpu(svcdPid: number): CpuSample {
  const cp = process.cpuUsage();
  const svcdAll = cpuOf(svcdPid, true);
  const svcd = cpuOf(svcdPid, false);
  const sum = (name: string) => pidsOf(name).reduce((n, pid) => n + cpuOf(pid, false), 0);
  return {
    controlPlane: (cp.user + cp.system) / 1e6,
    svcd,
    svcdChildren: svcdAll - svcd,
    dockerd: sum('dockerd'),
    containerd: sum('containerd') + sum('containerd-shim') + sum('containerd-shim-runc-v2'),
    machine: machineCpu(),
    load: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' '),
  };
}

/** CPU ms per lifecycle between two samples, by process. */
export function cpuPerLifecycle(a: CpuSample, b: CpuSample, n: number): Record<string, number> {
  const per = (k: keyof Omit<CpuSample, 'load'>) => Math.round(((b[k] - a[k]) * 1000) / Math.max(n, 1));
  return {
    controlPlane: per('controlPlane'),
    svcd: per('svcd'),
    svcdChildren: per('svcdChildren'),
    dockerd: per('dockerd'),
    containerd: per('containerd'),
    machine: per('machine'),
  };
}

/** What the environments left: Docker objects, firewall rules, datasets and loop devices. */
export function leaks(envs: string[], dataDir: string, dir: string): string[] {
  const out = dockerLeftovers(envs);
  const rules = ['iptables', 'ip6tables'].flatMap((p) => {
    try {
      return execFileSync(p, ['-S'], { encoding: 'utf8' }).split('\n');
    } catch {
      return [];
    }
  });
  for (const e of envs) {
    for (const r of rules) if (r.includes(`"svc:${e}"`)) out.push(`firewall ${r}`);
    for (const sub of ['envs', 'snaps'])
      if (existsSync(join(dataDir, sub, e))) out.push(`dataset ${sub}/${e}`);
  }
  // svcd's own XFS store (`.xfs/image`) stays attached while it runs; an environment's disk image
  // (`disks/<env>.img`, on file systems without project quotas) must not.
  for (const l of loopDevices(dir)) if (!l.includes('/.xfs/image')) out.push(`loop ${l}`);
  return out;
}

/** Containers, networks and volumes of the environments' compose projects: three listings in all. */
function dockerLeftovers(envs: string[]): string[] {
  const projects = new Set(envs.map((e) => e.toLowerCase()));
  const label = 'com.docker.compose.project';
  const list = (kind: string, args: string[], name = '.Name') =>
    execFileSync(
      'docker',
      [...args, '--filter', `label=${label}`, '--format', `{{.Label "${label}"}} {{${name}}}`],
      {
        encoding: 'utf8',
      },
    )
      .split('\n')
      .filter((l) => projects.has(l.split(' ')[0]))
      .map((l) => `${kind} ${l.split(' ')[1]}`);
  return [
    ...list('container', ['ps', '-a'], '.Names'),
    ...list('network', ['network', 'ls']),
    ...list('volume', ['volume', 'ls']),
  ];
}

/** Loop devices whose backing file lies under `dir`. */
export function loopDevices(dir: string): string[] {
  return execFileSync('losetup', ['-a'], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes(dir));
}
