// What this machine can do, detected for real (spec "Capabilities"): sent in hello and returned
// by host.report.
import { statfsSync } from 'node:fs';
import { availableParallelism, hostname, totalmem } from 'node:os';
import type { Capabilities } from '../protocol/commands.ts';
import { type HostRuntimes, runtimeCapabilities } from './docker/gvisor.ts';

export const VERSION = process.env.SVC_BUILD_VERSION || 'dev';

export interface Probes {
  dockerVersion(): Promise<string>;
  composePresent(): Promise<boolean>;
  storage: Capabilities['storage'];
  cow?: Capabilities['cow'];
  dataDir: string;
  runtimes?: HostRuntimes;
}

const ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

export function freeDiskGb(dir: string): number {
  try {
    const s = statfsSync(dir);
    return Math.round(((s.bavail * s.bsize) / 1024 ** 3) * 10) / 10;
  } catch {
    return 0;
  }
}

export async function detectCapabilities(p: Probes): Promise<Capabilities> {
  const [docker, compose] = await Promise.all([
    p.dockerVersion().catch(() => ''),
    p.composePresent().catch(() => false),
  ]);
  return {
    hostname: hostname(),
    os: process.platform,
    arch: ARCH[process.arch] ?? process.arch,
    cpus: availableParallelism(),
    memory_mb: Math.round(totalmem() / 1024 ** 2),
    disk_gb: freeDiskGb(p.dataDir),
    storage: p.storage,
    ...(p.cow ? { cow: p.cow } : {}),
    docker,
    compose,
    netns: process.platform === 'linux' && process.getuid?.() === 0,
    denvd_version: VERSION,
    ...runtimeCapabilities(p.runtimes),
  };
}
