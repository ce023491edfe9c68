// Subnet allocation: one bridge network per environment exhausts Docker's default
// address pools at about 30 networks, so the sidecar gives each environment a small subnet of
// its own from a configurable private range and renders it into the compose file.
//
// The allocation is recorded in the environment's state (`<data>/envs/<env>/subnet`), so it
// survives restarts, and is released when the environment's directory goes (destroy) or by
// `release`. A new allocation skips every recorded subnet and every subnet a Docker network on
// this engine already uses (other projects, other tools), and is serialised within the process.
//
// Several sidecars (or other tools) may share one engine, and none sees another's allocations
// until its network exists. The scan therefore starts at a random slot and wraps: with first-free,
// every sidecar picked the same lowest free subnet at once, and the losers of that race collided
// again on the next one (CI, 2026-11-24: "Pool overlaps" five times in a row). The stack retries a
// collision (stack.ts `createContainers`); random starts make a second one unlikely.
import { randomInt } from 'node:crypto';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { writeFileAtomic } from '../../shared/atomic-file.ts';
import { DockerError, dockerMessage } from './errors.ts';

export const DEFAULT_SUBNET_RANGE = '10.213.0.0/16';
/** 32 addresses: 29 for containers besides the network, broadcast and gateway addresses. */
export const DEFAULT_SUBNET_PREFIX = 27;
const RECORD = 'subnet';

interface Cidr {
  base: number;
  prefix: number;
}

/** Parses an IPv4 CIDR; throws DockerError on anything else (no regex backtracking: split and check). */
export function parseCidr(text: string): Cidr {
  const [addr, bits, extra] = text.split('/');
  const prefix = Number(bits);
  const parts = (addr ?? '').split('.');
  if (
    extra !== undefined ||
    !Number.isInteger(prefix) ||
    prefix < 8 ||
    prefix > 30 ||
    parts.length !== 4 ||
    !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)
  )
    throw new DockerError(`'${text}' is not an IPv4 CIDR such as 10.213.0.0/16 (prefix 8-30)`);
  const base = parts.reduce((n, p) => n * 256 + Number(p), 0);
  const size = 2 ** (32 - prefix);
  if (base % size !== 0) throw new DockerError(`'${text}' has host bits set; use its network address`);
  return { base, prefix };
}

export function formatCidr(c: Cidr): string {
  const b = c.base;
  return `${Math.floor(b / 2 ** 24) % 256}.${Math.floor(b / 2 ** 16) % 256}.${Math.floor(b / 256) % 256}.${b % 256}/${c.prefix}`;
}

function overlaps(a: Cidr, b: Cidr): boolean {
  const aEnd = a.base + 2 ** (32 - a.prefix);
  const bEnd = b.base + 2 ** (32 - b.prefix);
  return a.base < bEnd && b.base < aEnd;
}

export interface SubnetOptions {
  /** `<data>/envs`: where each environment's state directory is. */
  envsDir: string;
  /** The private range to allocate from (SVC_SUBNET_RANGE). */
  range?: string;
  /** Prefix length of each environment's subnet (SVC_SUBNET_PREFIX). */
  prefix?: number;
  /** Subnets already used on this engine; default: every Docker network's IPAM subnets. */
  taken?: () => Promise<string[]>;
  docker?: Docker;
}

/** Every IPv4 subnet of the engine's networks. */
export async function dockerSubnets(docker: Docker): Promise<string[]> {
  let nets: Docker.NetworkInspectInfo[];
  try {
    nets = await docker.listNetworks();
  } catch (err) {
    throw new DockerError(`listing networks for subnet allocation: ${dockerMessage(err)}`);
  }
  return nets
    .flatMap((n) => (n.IPAM?.Config ?? []).map((c) => c.Subnet ?? ''))
    .filter((s) => s.includes('.'));
}

export class SubnetAllocator {
  readonly range: Cidr;
  readonly prefix: number;
  private readonly opts: SubnetOptions;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(opts: SubnetOptions) {
    this.opts = opts;
    this.range = parseCidr(opts.range ?? DEFAULT_SUBNET_RANGE);
    this.prefix = opts.prefix ?? DEFAULT_SUBNET_PREFIX;
    if (!Number.isInteger(this.prefix) || this.prefix < this.range.prefix || this.prefix > 29)
      throw new DockerError(
        `subnet prefix /${this.prefix} must lie between the range's /${this.range.prefix} and /29`,
      );
  }

  private recordPath(envId: string): string {
    return join(this.opts.envsDir, envId, RECORD);
  }

  /** The environment's recorded subnet, or null. */
  async recorded(envId: string): Promise<string | null> {
    try {
      return (await readFile(this.recordPath(envId), 'utf8')).trim() || null;
    } catch {
      return null;
    }
  }

  /** Every recorded allocation: env id → subnet. */
  async allocations(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    let envs: string[] = [];
    try {
      envs = await readdir(this.opts.envsDir);
    } catch {
      return out;
    }
    await Promise.all(
      envs.map(async (env) => {
        const s = await this.recorded(env);
        if (s) out.set(env, s);
      }),
    );
    return out;
  }

  /** The environment's subnet: its recorded one, else a free one in the range, from a random slot (recorded). */
  allocate(envId: string): Promise<string> {
    const next = this.queue.then(() => this.allocateNow(envId));
    this.queue = next.catch(() => {});
    return next;
  }

  private async allocateNow(envId: string): Promise<string> {
    const mine = await this.recorded(envId);
    if (mine) return mine;
    const used: Cidr[] = [];
    for (const s of (await this.allocations()).values()) used.push(parseCidr(s));
    const taken = this.opts.taken ?? (() => dockerSubnets(this.opts.docker!));
    for (const s of await taken()) {
      try {
        used.push(parseCidr(s));
      } catch {
        // a network with a prefix outside 8-30 (a /32 or /31) cannot hold ours anyway
      }
    }
    const size = 2 ** (32 - this.prefix);
    const count = 2 ** (this.prefix - this.range.prefix);
    const start = randomInt(count);
    for (let n = 0; n < count; n++) {
      const i = (start + n) % count;
      const candidate = { base: this.range.base + i * size, prefix: this.prefix };
      if (used.some((u) => overlaps(u, candidate))) continue;
      const text = formatCidr(candidate);
      await mkdir(join(this.opts.envsDir, envId), { recursive: true });
      await writeFileAtomic(this.recordPath(envId), `${text}\n`);
      return text;
    }
    throw new DockerError(
      `no free /${this.prefix} subnet left in ${formatCidr(this.range)} (${count} in all): ` +
        'destroy environments or widen SVC_SUBNET_RANGE',
    );
  }

  /** Forgets the environment's subnet (its network must be gone). Idempotent. */
  async release(envId: string): Promise<void> {
    await rm(this.recordPath(envId), { force: true });
  }
}

/** The allocator configured by SVC_SUBNET_RANGE and SVC_SUBNET_PREFIX (defaults above). */
export function subnetAllocatorFromEnv(envsDir: string, docker: Docker, env = process.env): SubnetAllocator {
  const prefix = env.SVC_SUBNET_PREFIX ? Number(env.SVC_SUBNET_PREFIX) : undefined;
  return new SubnetAllocator({ envsDir, docker, range: env.SVC_SUBNET_RANGE || undefined, prefix });
}
