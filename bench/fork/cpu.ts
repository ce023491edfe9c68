// CPU spent on forks, in core-milliseconds, split by who spent it: the forks' own containers
// (their cgroups, cgroup v1 cpuacct as Docker 20.10 sets them up here), svcd with the children it
// waited for (the compose CLI, iptables), and the engine (dockerd, containerd and every shim).
// The engine's share is the host's: anything else using Docker at the same time counts in it.
import { readdirSync, readFileSync } from 'node:fs';
import type Docker from 'dockerode';

const TICK_MS = 10; // USER_HZ = 100 on Linux

/** utime + stime (+ the children it reaped) of one process, in ms; 0 when it is gone. */
function procMs(pid: number, children: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const own = Number(f[11]) + Number(f[12]);
    return (children ? own + Number(f[13]) + Number(f[14]) : own) * TICK_MS;
  } catch {
    return 0;
  }
}

/** The engine's processes: dockerd, containerd and the shims, by name. */
function enginePids(): Map<number, string> {
  const out = new Map<number, string>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const comm = readFileSync(`/proc/${name}/comm`, 'utf8').trim();
      if (comm === 'dockerd' || comm === 'containerd' || comm.startsWith('containerd-shim'))
        out.set(Number(name), comm);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export interface CpuMark {
  at: number;
  svcd: number;
  engine: Map<number, number>;
}

export function cpuMark(svcdPid: number): CpuMark {
  const engine = new Map<number, number>();
  for (const pid of enginePids().keys()) engine.set(pid, procMs(pid, false));
  return { at: Date.now(), svcd: procMs(svcdPid, true), engine };
}

/** Core-ms since `m`: svcd's, the engine's (shims started since count from 0), and the containers created since. */
export async function cpuSince(m: CpuMark, svcdPid: number, docker: Docker) {
  let engine = 0;
  for (const pid of enginePids().keys()) engine += procMs(pid, false) - (m.engine.get(pid) ?? 0);
  let containers = 0;
  let count = 0;
  for (const c of await docker.listContainers({ all: true })) {
    if (c.Created * 1000 < m.at - 1000) continue;
    try {
      containers += Number(readFileSync(`/sys/fs/cgroup/cpuacct/docker/${c.Id}/cpuacct.usage`, 'utf8')) / 1e6;
      count++;
    } catch {
      // not running (no cgroup) or not ours to read
    }
  }
  return {
    wallMs: Date.now() - m.at,
    svcdMs: procMs(svcdPid, true) - m.svcd,
    engineMs: engine,
    containersMs: containers,
    containers: count,
  };
}
