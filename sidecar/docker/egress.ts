// The egress probe. It runs from inside the stack's network without relying on any tool in the
// user's images: the sidecar (root) enters a container's network namespace with nsenter and runs
// the host's bash there (probe-shell.ts), or its own Node binary where the host has no bash, which
// makes TCP connects with a 4 s timeout to
//   - the "internet" targets (configurable; tests point them at a local listener), and
//   - the host itself: a listener the probe opens on 0.0.0.0:<random>, tried via the bridge
//     gateway IP and the host's primary IP.
// The child first connects to a listener of its own on loopback: a probe that cannot even do that
// proves nothing, so it is a ProbeError rather than a "denied".
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import type { Egress } from '../../protocol/spec.ts';
import type { DockerEngine } from './engine.ts';
import { dockerMessage, EGRESS_LEAK_HOST, EGRESS_LEAK_INTERNET, EgressLeak, ProbeError } from './errors.ts';
import { primaryIPv4 } from './hostip.ts';
import { findBash, parseShellReport, SELF_TARGET, SHELL_PROBE } from './probe-shell.ts';

export const DEFAULT_PROBE_TARGETS = ['1.1.1.1:443', '8.8.8.8:53'];
export const PROBE_TIMEOUT_MS = 4000;

export interface ProbeOptions {
  /** `host:port` addresses standing for the internet. */
  internetTargets?: string[];
  timeoutMs?: number;
  /** Program and arguments that run PROBE_SOURCE (`node -e`), always (tests name a broken one). */
  command?: string[];
  /**
   * The Node way when the host has no bash (probe-shell.ts is used where it has): `node -e`
   * by default; a packaged sidecar passes its own verb.
   */
  nodeCommand?: string[];
  /** The host's bash, found once at start (probe-shell.ts `findBash`); looked up per probe when absent. */
  shell?: string | null;
}

export interface ProbeReport {
  egress: Egress;
  verdict: 'allowed' | 'denied (verified)';
  /** Targets a TCP connect succeeded to. */
  reached: string[];
  /** Targets that refused, timed out or had no route, with the reason. */
  blocked: string[];
}

/** What the probe needs of a stack. */
export interface ProbeSubject {
  engine: DockerEngine;
  /** The stack's network; null for network mode `none` (loopback only: no gateway to try). */
  network: string | null;
  egress: Egress;
  /** Called before a leak is reported, so the leaking stack does not keep running. */
  stop(): Promise<void>;
}

// Runs inside the stack's network namespace. argv: [targets JSON, timeout ms]. Plain CommonJS.
export const PROBE_SOURCE = `
const net = require('node:net');
const targets = JSON.parse(process.argv[1]);
const timeout = Number(process.argv[2]);
function connect(target) {
  const i = target.lastIndexOf(':');
  return new Promise((resolve) => {
    const s = net.connect({ host: target.slice(0, i).replace(/^\\[|\\]$/g, ''), port: Number(target.slice(i + 1)) });
    const done = (ok, error) => { clearTimeout(t); s.destroy(); resolve({ target, ok, error }); };
    const t = setTimeout(() => done(false, 'timeout'), timeout);
    s.on('connect', () => done(true, ''));
    s.on('error', (e) => done(false, e.code || e.message));
  });
}
const server = net.createServer((c) => c.destroy());
server.on('error', (e) => { console.log(JSON.stringify({ selfcheck: 'listen: ' + e.message })); process.exit(0); });
server.listen(0, '127.0.0.1', async () => {
  const self = await connect('127.0.0.1:' + server.address().port);
  const results = await Promise.all(targets.map(connect));
  server.close();
  console.log(JSON.stringify({ selfcheck: self.ok ? 'ok' : self.error, results }));
  process.exit(0);
});
`;

interface ChildReport {
  selfcheck: string;
  results: { target: string; ok: boolean; error: string }[];
}

function checkTarget(t: string): string {
  const m = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(t);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new ProbeError(`target '${t}' is not host:port`);
  return t;
}

async function hostListener(): Promise<{ server: Server; port: number; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((sock) => {
    hits.push(sock.remoteAddress ?? '?');
    sock.on('error', () => {});
    sock.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '0.0.0.0', resolve);
  });
  const addr = server.address();
  if (!addr || typeof addr === 'string') throw new ProbeError('could not open a host listener');
  return { server, port: addr.port, hits };
}

/**
 * The pid of a running (or paused) container of the stack, and the stack network's gateway IP
 * (null without a network: the host is then tried at its primary IP only).
 */
async function probeSite(subject: ProbeSubject): Promise<{ pid: number; gateway: string | null }> {
  const containers = (await subject.engine.containers()).filter(
    (c) => c.state === 'running' || c.state === 'paused',
  );
  if (!containers.length)
    throw new ProbeError(`no running container in ${subject.engine.project} to probe from`);
  let info: Awaited<ReturnType<DockerEngine['inspect']>>;
  try {
    info = await subject.engine.docker.getContainer(containers[0].id).inspect();
  } catch (err) {
    throw new ProbeError(`inspect ${containers[0].service}: ${dockerMessage(err)}`);
  }
  if (!info.State.Pid) throw new ProbeError(`service '${containers[0].service}' has no process`);
  if (subject.network === null) {
    // Asked for no network: the container must have none, or a probe would verify the wrong thing.
    const attached = Object.keys(info.NetworkSettings.Networks ?? {}).filter((n) => n !== 'none');
    if (attached.length)
      throw new ProbeError(`service '${containers[0].service}' is attached to ${attached.join(', ')}`);
    return { pid: info.State.Pid, gateway: null };
  }
  const gateway = info.NetworkSettings.Networks[subject.network]?.Gateway;
  if (!gateway)
    throw new ProbeError(`service '${containers[0].service}' is not attached to ${subject.network}`);
  return { pid: info.State.Pid, gateway };
}

/** How the child runs: the bash script with its argv, or a Node program given PROBE_SOURCE's argv. */
type ProbeProgram = { shell: string } | { argv: string[] };

/** An explicit command, else the host's bash, else Node (`node -e`, or a packaged sidecar's verb). */
async function probeProgram(options: ProbeOptions): Promise<ProbeProgram> {
  if (options.command) return { argv: options.command };
  const shell = options.shell !== undefined ? options.shell : await findBash();
  if (shell) return { shell };
  return { argv: options.nodeCommand ?? [process.execPath, '-e', PROBE_SOURCE] };
}

function runChild(
  pid: number,
  targets: string[],
  program: ProbeProgram,
  timeoutMs: number,
): Promise<ChildReport> {
  const args =
    'shell' in program
      ? [
          program.shell,
          '-c',
          SHELL_PROBE,
          'probe',
          String(Math.ceil(timeoutMs / 1000)),
          SELF_TARGET,
          ...targets,
        ]
      : [...program.argv, JSON.stringify(targets), String(timeoutMs)];
  return new Promise((resolve, reject) => {
    execFile(
      'nsenter',
      ['--net=/proc/' + pid + '/ns/net', '--', ...args],
      { encoding: 'utf8', timeout: timeoutMs + 10_000, maxBuffer: 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException;
          const why =
            e.code === 'ENOENT' ? 'nsenter is not installed (util-linux)' : stderr.trim() || e.message;
          return reject(new ProbeError(why));
        }
        if ('shell' in program) {
          const report = parseShellReport(stdout, targets);
          if (report) return resolve(report);
          return reject(
            new ProbeError(`unreadable probe output: ${stdout.slice(0, 200) || stderr.slice(0, 200)}`),
          );
        }
        try {
          const report = JSON.parse(stdout.trim().split('\n').pop() ?? '') as ChildReport;
          if (!Array.isArray(report.results)) throw new Error('no results');
          resolve(report);
        } catch {
          reject(new ProbeError(`unreadable probe output: ${stdout.slice(0, 200) || stderr.slice(0, 200)}`));
        }
      },
    );
  });
}

/** Probes without judging: what the stack's network reached. */
export async function probeEgress(
  subject: ProbeSubject,
  options: ProbeOptions = {},
): Promise<ProbeReport & { hostTargets: string[]; hostHits: string[] }> {
  const internetTargets = (options.internetTargets ?? DEFAULT_PROBE_TARGETS).map(checkTarget);
  const timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
  const program = await probeProgram(options);
  const site = await probeSite(subject);
  const listener = await hostListener();
  try {
    const hostIps = [...new Set([...(site.gateway ? [site.gateway] : []), await primaryIPv4()])];
    const hostTargets = hostIps.map((ip) => `${ip}:${listener.port}`);
    const report = await runChild(site.pid, [...internetTargets, ...hostTargets], program, timeoutMs);
    if (report.selfcheck !== 'ok')
      throw new ProbeError(
        `the probe could not connect inside the stack's network namespace (${report.selfcheck})`,
      );
    return {
      egress: subject.egress,
      verdict: subject.egress === 'allow' ? 'allowed' : 'denied (verified)',
      reached: report.results.filter((r) => r.ok).map((r) => r.target),
      blocked: report.results.filter((r) => !r.ok).map((r) => `${r.target} (${r.error})`),
      hostTargets,
      hostHits: [...listener.hits],
    };
  } finally {
    listener.server.close();
  }
}

/**
 * Probes and judges. Allow: reports `allowed`. Deny: any connect that succeeded (or any connection
 * the host listener saw) is a leak: the stack is stopped and EgressLeak thrown; else `denied (verified)`.
 */
export async function verifyEgress(subject: ProbeSubject, options: ProbeOptions = {}): Promise<ProbeReport> {
  const { hostTargets, hostHits, ...report } = await probeEgress(subject, options);
  if (subject.egress === 'allow') return report;
  const hostReached = report.reached.filter((t) => hostTargets.includes(t));
  const netReached = report.reached.filter((t) => !hostTargets.includes(t));
  if (!netReached.length && !hostReached.length && !hostHits.length) return report;
  let message = EGRESS_LEAK_INTERNET;
  if (!netReached.length) message = `${EGRESS_LEAK_HOST} (${[...hostReached, ...hostHits].join(', ')})`;
  const leak = new EgressLeak(message, report.reached);
  try {
    await subject.stop();
  } catch (err) {
    leak.stopError = (err as Error).message;
  }
  throw leak;
}
