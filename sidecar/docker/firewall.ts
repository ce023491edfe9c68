// Host firewall rules for deny stacks. Docker's `internal: true` drops forwarded traffic (no route
// to the internet or to other bridges), but packets addressed to the host itself (the bridge
// gateway, the host's primary IP, any host listener) go through INPUT, which Docker leaves open.
// Each deny stack gets two rules in our chain, matched on its bridge name: replies to connections
// the host opened are let through, everything else the stack sends to the host is dropped.
// Rules are added before the stack starts (iptables accepts names of interfaces that do not
// exist yet), so there is no moment in which a container could reach the host.
// INPUT jumps to the chain only for packets from our bridges (`-i svc+`): the host's other
// traffic (its own loopback, the sidecar's stream) does not walk three rules per deny stack
// (issue 15: 346 leftover rules cost a control plane on the same machine ~30 µs per exec, ~13%,
// and more than half of its idle CPU).
import { execFile } from 'node:child_process';
import { AGAIN, retry } from '../../shared/concurrency.ts';
import { FirewallError } from './errors.ts';

export const ISOLATION_CHAIN = 'SVC-ISOLATION';
/** Every stack's bridge name starts with this (render.ts `bridgeName`); the INPUT jump matches it. */
export const BRIDGE_PREFIX = 'svc';

/** The INPUT jump's match and target, in the order `iptables -S` prints them. */
function jumpSpec(chain: string): string[] {
  return ['-i', `${BRIDGE_PREFIX}+`, '-j', chain];
}
/** The jump of earlier versions, for every packet; replaced where found. */
function oldJumpSpec(chain: string): string[] {
  return ['-j', chain];
}

export interface FirewallOptions {
  chain?: string;
  /** iptables programs to manage; default both families when present. */
  programs?: string[];
}

function ipt(program: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(program, ['-w', '10', ...args], { encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new FirewallError(`${program} ${args.join(' ')}: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

async function succeeds(program: string, args: string[]): Promise<boolean> {
  try {
    await ipt(program, args);
    return true;
  } catch {
    return false;
  }
}

let detected: Promise<string[]> | undefined;
/** iptables, plus ip6tables when the kernel has IPv6 tables (else IPv6 cannot carry anything). */
function programs(opts: FirewallOptions): Promise<string[]> {
  if (opts.programs) return Promise.resolve(opts.programs);
  detected ??= (async () => {
    const out: string[] = [];
    for (const p of ['iptables', 'ip6tables']) if (await succeeds(p, ['-S', 'INPUT'])) out.push(p);
    if (!out.includes('iptables'))
      throw new FirewallError(
        'iptables is missing or not usable (the sidecar must run as root with iptables installed)',
      );
    return out;
  })();
  detected.catch(() => {
    detected = undefined;
  });
  return detected;
}

/** The rule specs (without -A/-D) isolating one env's bridge. */
export function isolationRules(bridge: string, envId: string): string[][] {
  const tag = ['-m', 'comment', '--comment', `svc:${envId}`];
  return [
    ['-i', bridge, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', ...tag, '-j', 'RETURN'],
    // TCP is refused rather than dropped, so a probe (and a user's client) learns at once instead
    // of after a connect timeout (issue 15: the egress probe waited 4 s on every deny start).
    ['-i', bridge, '-p', 'tcp', ...tag, '-j', 'REJECT', '--reject-with', 'tcp-reset'],
    ['-i', bridge, ...tag, '-j', 'DROP'],
  ];
}

/** Runs `<program>-restore --noflush` with `lines` (`-A`/`-D`/`-I` commands) as one atomic batch. */
function restore(program: string, lines: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      `${program}-restore`,
      ['-w', '10', '--noflush'],
      { encoding: 'utf8', timeout: 30_000 },
      (err, _stdout, stderr) => {
        if (err) reject(new FirewallError(`${program}-restore: ${stderr.trim() || err.message}`));
        else resolve();
      },
    );
    child.stdin?.on('error', () => {}); // a restore that dies early reports through its exit
    child.stdin?.end(`*filter\n${lines.join('\n')}\nCOMMIT\n`);
  });
}

/** The value after `flag` in a rule's `-S` line, unquoted. */
function flagValue(line: string, flag: string): string | undefined {
  const t = line.split(' ');
  const i = t.indexOf(flag);
  return i >= 0 ? t[i + 1]?.replace(/^"|"$/g, '') : undefined;
}

/** Whether a `-S` line is one of the env's rules on its bridge. */
export function ownsRule(line: string, bridge: string, envId: string): boolean {
  return flagValue(line, '-i') === bridge && flagValue(line, '--comment') === `svc:${envId}`;
}

/** The chain's `-A` lines, or null when it does not exist. */
async function chainRules(program: string, chain: string): Promise<string[] | null> {
  let out: string;
  try {
    out = await ipt(program, ['-S', chain]);
  } catch {
    return null;
  }
  return out.split('\n').filter((l) => l.startsWith(`-A ${chain} `));
}

/**
 * One family: what is missing of the env's rules (and of the INPUT jump) is added in one
 * `-restore` batch after one `-S` of the filter table (issue 15: one check-then-append process per
 * rule made 16 iptables processes per deny start, each loading the whole ruleset).
 */
async function isolateIn(program: string, chain: string, bridge: string, envId: string): Promise<void> {
  const table = (await ipt(program, ['-S'])).split('\n');
  if (!table.includes(`-N ${chain}`)) {
    try {
      await ipt(program, ['-N', chain]);
    } catch (err) {
      if (!/exists/i.test((err as Error).message)) throw err;
    }
  }
  const have = new Set(
    table
      .filter((l) => l.startsWith(`-A ${chain} `) && ownsRule(l, bridge, envId))
      .map((l) => flagValue(l, '-j')),
  );
  const lines = isolationRules(bridge, envId)
    .filter((rule) => !have.has(rule[rule.indexOf('-j') + 1]))
    .map((rule) => `-A ${chain} ${rule.join(' ')}`);
  if (!table.includes(`-A INPUT ${jumpSpec(chain).join(' ')}`))
    lines.push(`-I INPUT 1 ${jumpSpec(chain).join(' ')}`);
  // In the same batch, so there is no moment without a jump.
  if (table.includes(`-A INPUT ${oldJumpSpec(chain).join(' ')}`))
    lines.push(`-D INPUT ${oldJumpSpec(chain).join(' ')}`);
  if (lines.length) await restore(program, lines);
}

async function ensureJump(program: string, chain: string): Promise<void> {
  if (!(await succeeds(program, ['-C', 'INPUT', ...jumpSpec(chain)])))
    await ipt(program, ['-I', 'INPUT', '1', ...jumpSpec(chain)]);
}

/** A concurrent prune or release may change the chain between our read and our batch: read again. */
async function retried(step: () => Promise<void>): Promise<void> {
  await retry(
    async (n) => {
      try {
        await step();
        return undefined;
      } catch (err) {
        if (n >= 4) throw err;
        return AGAIN;
      }
    },
    { delayMs: (n) => 50 * (n + 1) },
  );
}

/** Drops everything the bridge sends to the host except replies. Idempotent. */
export async function isolateBridge(
  bridge: string,
  envId: string,
  opts: FirewallOptions = {},
): Promise<void> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  const families = await programs(opts);
  await Promise.all(families.map((program) => retried(() => isolateIn(program, chain, bridge, envId))));
}

/** Removes the bridge's rules (every copy) in one batch per family. Idempotent. */
export async function releaseBridge(
  bridge: string,
  envId: string,
  opts: FirewallOptions = {},
): Promise<void> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  const families = await programs(opts);
  await Promise.all(
    families.map((program) =>
      retried(async () => {
        const ours = ((await chainRules(program, chain)) ?? []).filter((l) => ownsRule(l, bridge, envId));
        if (ours.length)
          await restore(
            program,
            ours.map((l) => `-D${l.slice(2)}`),
          );
      }),
    ),
  );
}

/** The chain's rules in `-S` form (both families), for diagnostics and tests. */
export async function listIsolationRules(opts: FirewallOptions = {}): Promise<string[]> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  const out: string[] = [];
  for (const program of await programs(opts)) {
    if (!(await succeeds(program, ['-S', chain]))) continue;
    const lines = (await ipt(program, ['-S', chain])).split('\n').filter((l) => l.startsWith('-A '));
    out.push(...lines.map((l) => `${program} ${l}`));
  }
  return out;
}

/**
 * Removes the chain and its INPUT jump when no env uses it any more. A concurrent isolateBridge
 * either finds the chain gone and recreates it, or makes `-X` fail, after which the jump is restored.
 */
export async function pruneIsolationChain(opts: FirewallOptions = {}): Promise<boolean> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  let pruned = true;
  for (const program of await programs(opts)) {
    if (!(await succeeds(program, ['-S', chain]))) continue;
    const rules = (await ipt(program, ['-S', chain])).split('\n').filter((l) => l.startsWith('-A '));
    if (rules.length) {
      pruned = false;
      continue;
    }
    for (const spec of [jumpSpec(chain), oldJumpSpec(chain)])
      while (await succeeds(program, ['-C', 'INPUT', ...spec])) await ipt(program, ['-D', 'INPUT', ...spec]);
    if (!(await succeeds(program, ['-X', chain]))) {
      await ensureJump(program, chain);
      pruned = false;
    }
  }
  return pruned;
}
