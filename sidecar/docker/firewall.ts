// Host firewall rules for deny stacks, in a chain of ours in two tables, each entered only for
// packets from our bridges (`-i svc+`, every stack's bridge is `svc` + 12 hex), so the host's
// other traffic walks none of them (measured: 346 leftover rules cost a control plane on the same
// machine ~30 µs per exec, ~13%, and more than half of its idle CPU), and, where the kernel has
// the physdev match, not traffic between a stack's own services either.
// - filter INPUT: Docker's `internal: true` leaves packets addressed to the host itself (the
//   bridge gateway, the host's primary IP, any host listener) open. Replies to connections the
//   host opened are let through; everything else the stack sends to the host is refused.
// - mangle FORWARD: Docker's own drop of an internal network's forwarded traffic hangs on its
//   FORWARD jump to DOCKER-ISOLATION-STAGE-1, which Docker 20.10 deletes and inserts again on
//   every network create (two ruleset updates). In between, a deny stack reached another stack's
//   published port (CI, 2026-11-27). Nothing of Docker's touches mangle FORWARD, which runs
//   before filter: there the stack's packets to and from any other interface are dropped.
// Rules are added before the stack starts (iptables accepts names of interfaces that do not
// exist yet), so there is no moment in which a container could reach the host or another stack.
import { execFile } from 'node:child_process';
import { retryFailures } from '../../shared/concurrency.ts';
import { FirewallError } from './errors.ts';

export const ISOLATION_CHAIN = 'SVC-ISOLATION';
/** Every stack's bridge name starts with this (render.ts `bridgeName`); the jumps match it. */
export const BRIDGE_PREFIX = 'svc';

/** Where a deny stack's rules live: our chain in `table`, jumped to from the built-in chain `from`. */
interface Hook {
  table: 'filter' | 'mangle';
  from: 'INPUT' | 'FORWARD';
  /**
   * The jump's match and target, in the order `iptables -S` prints them: the first is installed,
   * the others (earlier or fallback forms) are replaced where found. `physdev`: whether the
   * kernel has the physdev match (see hasPhysdev).
   */
  jumps: (chain: string, physdev: boolean) => string[][];
  rules: (bridge: string, tag: string[]) => string[][];
}

const FROM_OURS = ['-i', `${BRIDGE_PREFIX}+`];
/** Packets routed out of our bridges, not those bridged between a stack's own services. */
const ROUTED = ['-m', 'physdev', '!', '--physdev-is-bridged'];

const HOOKS: readonly Hook[] = [
  {
    table: 'filter',
    from: 'INPUT',
    // The second form is the jump of earlier versions, for every packet.
    jumps: (chain) => [
      [...FROM_OURS, '-j', chain],
      ['-j', chain],
    ],
    rules: (bridge, tag) => [
      ['-i', bridge, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', ...tag, '-j', 'RETURN'],
      // TCP is refused rather than dropped, so a probe (and a user's client) learns at once instead
      // of after a connect timeout (the egress probe once waited 4 s on every deny start).
      ['-i', bridge, '-p', 'tcp', ...tag, '-j', 'REJECT', '--reject-with', 'tcp-reset'],
      ['-i', bridge, ...tag, '-j', 'DROP'],
    ],
  },
  {
    table: 'mangle',
    from: 'FORWARD',
    // With Docker's br_netfilter, traffic between a stack's own services passes FORWARD too; the
    // physdev match keeps it out of the chain (else every such packet walks two rules per deny
    // stack), where the kernel has it.
    jumps: (chain, physdev) => {
      const routed = [...FROM_OURS, ...ROUTED, '-j', chain];
      const all = [...FROM_OURS, '-j', chain];
      return physdev ? [routed, all] : [all, routed];
    },
    // Within the bridge (the stack's own services) stays open; mangle cannot REJECT.
    rules: (bridge, tag) => [
      ['-i', bridge, '!', '-o', bridge, ...tag, '-j', 'DROP'],
      ['!', '-i', bridge, '-o', bridge, ...tag, '-j', 'DROP'],
    ],
  },
];

export interface FirewallOptions {
  chain?: string;
  /** iptables programs to manage; default both families when present. */
  programs?: string[];
}

/** Runs a firewall program; its output, or a FirewallError naming the call and its stderr. */
function run(program: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      program,
      args,
      // A busy host's ruleset (iptables-save prints every table) can be large.
      { encoding: 'utf8', timeout: 30_000, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err)
          reject(new FirewallError(`${[program, ...args].join(' ')}: ${stderr.trim() || err.message}`));
        else resolve(stdout);
      },
    );
  });
}

function ipt(program: string, args: string[]): Promise<string> {
  return run(program, ['-w', '10', ...args]);
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

const physdevOf = new Map<string, Promise<boolean>>();
/** Whether the kernel takes the physdev match: a rule using it in a throwaway chain, once per program. */
export function hasPhysdev(program: string): Promise<boolean> {
  let known = physdevOf.get(program);
  if (!known) {
    known = (async () => {
      const t = ['-t', 'mangle'];
      const probe = `SVC-PHYSDEV-${process.pid}`;
      if (!(await succeeds(program, [...t, '-N', probe]))) return false;
      try {
        return await succeeds(program, [...t, '-A', probe, ...ROUTED, '-j', 'RETURN']);
      } finally {
        await succeeds(program, [...t, '-F', probe]);
        await succeeds(program, [...t, '-X', probe]);
      }
    })();
    physdevOf.set(program, known);
  }
  return known;
}

/** The rule specs (without -A/-D) isolating one env's bridge, per table. */
export function isolationRules(bridge: string, envId: string): Record<Hook['table'], string[][]> {
  const tag = ['-m', 'comment', '--comment', `svc:${envId}`];
  return Object.fromEntries(HOOKS.map((h) => [h.table, h.rules(bridge, tag)])) as Record<
    Hook['table'],
    string[][]
  >;
}

/** Runs `<program>-restore --noflush` with each table's `-A`/`-D`/`-I` commands as one batch. */
function restore(program: string, batches: Map<string, string[]>): Promise<void> {
  const text = [...batches]
    .filter(([, lines]) => lines.length)
    .map(([table, lines]) => `*${table}\n${lines.join('\n')}\nCOMMIT\n`)
    .join('');
  if (!text) return Promise.resolve();
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
    child.stdin?.end(text);
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

/**
 * Every table of one family as `-S` prints it (a chain as `-N <chain>`, its rules as `-A` lines),
 * from one `<program>-save`: a process per table was two of the four iptables processes of each
 * deny start and of each destroy, and each one svcd starts costs it a fork of its whole memory
 * (~6 ms of its CPU, measured under 30 concurrent lifecycles: iptables was most of its children).
 * A table the kernel has not loaded is absent (nothing of ours is in it).
 */
async function savedTables(program: string): Promise<Map<string, string[]>> {
  const out = await run(`${program}-save`, []);
  const tables = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of out.split('\n')) {
    if (line.startsWith('*')) {
      current = [];
      tables.set(line.slice(1).trim(), current);
    } else if (!current || line === 'COMMIT' || line.startsWith('#')) continue;
    else if (line.startsWith(':')) current.push(`-N ${line.slice(1).split(' ')[0]}`);
    else current.push(line);
  }
  return tables;
}

/** The chain's `-A` lines in `table`, or null when it does not exist. */
async function chainRules(program: string, table: string, chain: string): Promise<string[] | null> {
  let out: string;
  try {
    out = await ipt(program, ['-t', table, '-S', chain]);
  } catch {
    return null;
  }
  return out.split('\n').filter((l) => l.startsWith(`-A ${chain} `));
}

/**
 * One family: one `-save` of its tables, then what is missing of the env's rules and of the jumps in one
 * `-restore` batch (one check-then-append process per rule made 16 iptables processes per
 * deny start, each loading the whole ruleset). An incomplete set is replaced whole in that batch,
 * so its rules keep their order.
 */
async function isolateIn(program: string, chain: string, bridge: string, envId: string): Promise<void> {
  const wanted = isolationRules(bridge, envId);
  const batches = new Map<string, string[]>();
  const tables = await savedTables(program);
  for (const hook of HOOKS) {
    const table = tables.get(hook.table) ?? [];
    if (!table.includes(`-N ${chain}`)) {
      try {
        await ipt(program, ['-t', hook.table, '-N', chain]);
      } catch (err) {
        if (!/exists/i.test((err as Error).message)) throw err;
      }
    }
    const want = wanted[hook.table];
    const have = table.filter((l) => l.startsWith(`-A ${chain} `) && ownsRule(l, bridge, envId));
    const targets = (rules: string[][]) => rules.map((r) => r[r.indexOf('-j') + 1]).join(' ');
    const complete = have.length === want.length && targets(have.map((l) => l.split(' '))) === targets(want);
    const lines = complete
      ? []
      : [...have.map((l) => `-D${l.slice(2)}`), ...want.map((rule) => `-A ${chain} ${rule.join(' ')}`)];
    const [jump, ...others] = hook.jumps(chain, await hasPhysdev(program)).map((j) => j.join(' '));
    if (!table.includes(`-A ${hook.from} ${jump}`)) lines.push(`-I ${hook.from} 1 ${jump}`);
    // In the same batch, so there is no moment without a jump.
    for (const other of others)
      if (table.includes(`-A ${hook.from} ${other}`)) lines.push(`-D ${hook.from} ${other}`);
    batches.set(hook.table, lines);
  }
  await restore(program, batches);
}

async function ensureJump(program: string, hook: Hook, chain: string): Promise<void> {
  const t = ['-t', hook.table];
  const [jump] = hook.jumps(chain, await hasPhysdev(program));
  if (!(await succeeds(program, [...t, '-C', hook.from, ...jump])))
    await ipt(program, [...t, '-I', hook.from, '1', ...jump]);
}

/** A concurrent prune or release may change the chain between our read and our batch: read again. */
async function retried(step: () => Promise<void>): Promise<void> {
  await retryFailures(step, {
    attempts: 5,
    when: () => true,
    backoff: { baseMs: 50, capMs: 400, jitter: 0.25 },
  });
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

/** Removes the bridge's rules (every copy, both tables) in one batch per family. Idempotent. */
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
        const batches = new Map<string, string[]>();
        const tables = await savedTables(program);
        for (const { table } of HOOKS) {
          const ours = (tables.get(table) ?? []).filter(
            (l) => l.startsWith(`-A ${chain} `) && ownsRule(l, bridge, envId),
          );
          batches.set(
            table,
            ours.map((l) => `-D${l.slice(2)}`),
          );
        }
        await restore(program, batches);
      }),
    ),
  );
}

/** The chains' rules in `-S` form (both families, both tables), for diagnostics and tests. */
export async function listIsolationRules(opts: FirewallOptions = {}): Promise<string[]> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  const out: string[] = [];
  for (const program of await programs(opts))
    for (const { table } of HOOKS)
      out.push(
        ...((await chainRules(program, table, chain)) ?? []).map((l) => `${program} -t ${table} ${l}`),
      );
  return out;
}

/**
 * Removes the chains and their jumps when no env uses them any more. A concurrent isolateBridge
 * either finds a chain gone and recreates it, or makes `-X` fail, after which the jump is restored.
 */
export async function pruneIsolationChain(opts: FirewallOptions = {}): Promise<boolean> {
  const chain = opts.chain ?? ISOLATION_CHAIN;
  let pruned = true;
  for (const program of await programs(opts)) {
    for (const hook of HOOKS) {
      const t = ['-t', hook.table];
      const rules = await chainRules(program, hook.table, chain);
      if (rules === null) continue;
      if (rules.length) {
        pruned = false;
        continue;
      }
      for (const spec of hook.jumps(chain, await hasPhysdev(program)))
        while (await succeeds(program, [...t, '-C', hook.from, ...spec]))
          await ipt(program, [...t, '-D', hook.from, ...spec]);
      if (!(await succeeds(program, [...t, '-X', chain]))) {
        await ensureJump(program, hook, chain);
        pruned = false;
      }
    }
  }
  return pruned;
}
