// svcd: the sidecar program (spec "Sidecar program"). Lifecycle: resolve options and saved
// identity → open storage, find the compose tool → finish commands a crash cut off → keep the one
// outbound stream open until stopped or refused (1008 is fatal and exits non-zero).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Capabilities } from '../protocol/commands.ts';
import type { Frame } from '../protocol/frames.ts';
import { settledWithin } from '../shared/concurrency.ts';
import { Faults, guard } from '../shared/faults.ts';
import { detectCapabilities, VERSION } from './capabilities.ts';
import { engineOf, type SidecarContext } from './context.ts';
import { BuildImages, DEFAULT_BUILD_GC_EVERY_MS, DEFAULT_BUILD_KEEP_MS } from './docker/build-gc.ts';
import { type ComposeFlavor, detectComposeTool } from './docker/compose-tool.ts';
import { dockerClient, EngineState } from './docker/engine.ts';
import { setUpRuntimes } from './docker/gvisor.ts';
import { findBash } from './docker/probe-shell.ts';
import { sparesEnabledFromEnv } from './docker/spare-execs.ts';
import { subnetAllocatorFromEnv } from './docker/subnets.ts';
import { handlers, undoInterrupted } from './handlers/index.ts';
import { install } from './install.ts';
import { Link, Refused } from './link.ts';
import { defaultDataDir, OptionsError, parseOptions, type SidecarOptions } from './options.ts';
import { stackPoolFromEnv } from './pool.ts';
import { killOrphans, OrphanRecords } from './processes/orphans.ts';
import { ProcessTable } from './processes/table.ts';
import { Runner } from './runner.ts';
import { PROBE_VERB, probeCommand, runProbeVerb } from './sea.ts';
import { type HostState, loadState, saveState } from './state.ts';
import { openStorage } from './storage/index.ts';
import { testHold } from './test-hold.ts';

const log = (msg: string) => process.stderr.write(`svcd: ${msg}\n`);

/** The exit status after a fault that made continuing unsafe (sysexits' EX_SOFTWARE). */
export const EXIT_UNSAFE = 70;

/** Saved state wins for server, data dir and pool unless the flag was given. */
export function resolve(opts: SidecarOptions, saved: HostState | null) {
  const pick = (flag: boolean, fromFlagOrEnv: string, fromState: string | undefined) =>
    flag ? fromFlagOrEnv : fromState || fromFlagOrEnv;
  return {
    server: pick(opts.explicit.server, opts.server, saved?.server),
    dataDir: pick(opts.explicit.data, opts.dataDir, saved?.data_dir) || defaultDataDir(),
    zfsPool: pick(opts.explicit.zfsPool, opts.zfsPool, saved?.zfs_pool),
  };
}

/** Egress probe targets standing for "the internet": SVC_EGRESS_PROBE=host:port,host:port. */
function probeTargets(): string[] | undefined {
  const v = process.env.SVC_EGRESS_PROBE?.trim();
  return v
    ? v
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : undefined;
}

/** A whole number of seconds from SVC_* (in ms), or the default. */
function secondsEnv(name: string, fallbackMs: number): number {
  const raw = process.env[name]?.trim();
  if (!raw) return fallbackMs;
  if (!/^\d{1,9}$/.test(raw))
    throw new OptionsError(`${name}: '${raw.slice(0, 40)}' is not a whole number of seconds`);
  return Number(raw) * 1000;
}

/** Collects unused built images every SVC_BUILD_GC_EVERY seconds (0 = never); returns the stop. */
function collectPeriodically(ctx: SidecarContext): () => void {
  const every = secondsEnv('SVC_BUILD_GC_EVERY', DEFAULT_BUILD_GC_EVERY_MS);
  if (every === 0) return () => {};
  const timer = setInterval(
    guard('built images: collect', () => {
      ctx.builds
        .collect(ctx.docker, ctx.dataDir, ctx.buildKeepMs ?? DEFAULT_BUILD_KEEP_MS)
        .then((r) => r.removed.length && log(`removed ${r.removed.length} unused built image(s)`))
        .catch((err: Error) => log(`collecting built images: ${err.message}`));
    }),
    every,
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** With SVC_EXIT_WITH_PARENT=<pid> (svc-server --dev), stop when that process is gone. */
function watchParent(stop: () => void): void {
  const pid = Number(process.env.SVC_EXIT_WITH_PARENT);
  if (!pid) return;
  const timer = setInterval(
    guard('watch the parent', () => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(timer);
        stop();
      }
    }),
    1000,
  );
  timer.unref();
}

export async function runSidecar(opts: SidecarOptions): Promise<number> {
  // A throw nothing caught is logged with its stack and counted, and the sidecar goes on serving
  // its stacks; it exits only where going on would be unsafe, for its supervisor (the systemd unit
  // `svcd install` writes: Restart=always) to start it again.
  const faults = new Faults({ log });
  const uninstall = faults.installProcessHandlers(process, (reason) => {
    log(`exiting: ${reason}`);
    process.exit(EXIT_UNSAFE);
  });
  try {
    return await serve(opts);
  } finally {
    uninstall();
    faults.close();
  }
}

async function serve(opts: SidecarOptions): Promise<number> {
  const saved = loadState(opts.statePath);
  if (opts.verb === 'run' && !saved)
    throw new OptionsError(`no saved identity at ${opts.statePath}: run svcd join first`);
  const { server, dataDir, zfsPool } = resolve(opts, saved);
  if (!server) throw new OptionsError('no server: pass --server (or SVC_SERVER)');
  if (!saved && !opts.token) throw new OptionsError('the first join needs --token (or SVC_JOIN_TOKEN)');
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const xfsLoop = process.env.SVC_XFS_LOOP === 'auto';
  const storage = await openStorage({ dataDir, zfsPool: zfsPool || undefined, xfsLoop, log });
  const tool = await detectComposeTool(
    (process.env.SVC_COMPOSE as ComposeFlavor | undefined) || undefined,
  ).catch((err) => {
    log(err.message);
    return null;
  });
  const docker = dockerClient();
  const runtimes = await setUpRuntimes(docker, log);
  log(
    runtimes.gvisor
      ? `runtimes runc, gvisor (runsc ${runtimes.gvisor.version}, platform ${runtimes.gvisor.platform}, network ${runtimes.gvisor.network}); default ${runtimes.default}`
      : `runtime runc only: ${runtimes.problem}; default ${runtimes.default}`,
  );
  let identity = saved ? { host_id: saved.host_id, secret: saved.secret } : null;
  const capabilities = (): Promise<Capabilities> =>
    detectCapabilities({
      dataDir,
      storage: storage.kind,
      cow: storage.cow,
      dockerVersion: async () => ((await docker.version()) as { Version: string }).Version,
      composePresent: async () => tool !== null,
      runtimes,
    });
  // Without a compose tool (logged above) the host still joins and reports `compose: false`, so
  // the control plane shows why; every stack command then fails with composeTool()'s error.
  const ctx: SidecarContext = {
    dataDir,
    storage,
    tool,
    docker,
    engineState: new EngineState(),
    builds: new BuildImages(),
    probe: { internetTargets: probeTargets(), nodeCommand: await probeCommand(), shell: await findBash() },
    log,
    readers: new Map(),
    hold: testHold(dataDir, log),
    subnets: subnetAllocatorFromEnv(join(dataDir, 'envs'), docker),
    buildKeepMs: secondsEnv('SVC_BUILD_KEEP', DEFAULT_BUILD_KEEP_MS),
    pool: stackPoolFromEnv(),
    runtimes,
  };
  let link: Link | null = null;
  // Processes an earlier svcd started cannot be followed or signalled any more: they end now.
  const orphans = await killOrphans(dataDir);
  if (orphans) log(`killed ${orphans} process(es) an earlier svcd left running`);
  ctx.processes = new ProcessTable(
    (envId) => engineOf(ctx, envId),
    { send: (data) => link?.sendBinary(data) ?? false, buffered: () => link?.buffered() ?? 0 },
    log,
    new OrphanRecords(dataDir),
  );
  ctx.engineState.spares.enabled = sparesEnabledFromEnv();
  const stopCollecting = collectPeriodically(ctx);

  const runner = new Runner(dataDir, handlers(ctx, capabilities), (f) => link?.send(f), ctx.hold);
  const cut = await runner.recover((kind, envId) => undoInterrupted(ctx, kind, envId), log);
  if (cut.length) log(`finished commands a restart cut off: ${cut.join('; ')}`);

  link = new Link({
    server,
    token: opts.token,
    identity: () => identity,
    capabilities,
    onIdentity: (hostId, secret) => {
      identity = { host_id: hostId, secret };
      saveState(opts.statePath, { server, host_id: hostId, secret, data_dir: dataDir, zfs_pool: zfsPool });
      log(`joined as ${hostId}; identity saved to ${opts.statePath}`);
    },
    onCommand: guard('runner: command', (f: Frame) => runner.handle(f)),
    onClosed: () => ctx.processes?.dropFollowers(),
    log,
  });
  const stop = () => {
    log('stopping');
    stopCollecting();
    link?.stop();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  watchParent(stop);
  log(
    `svcd ${VERSION}: storage ${storage.kind} (copy-on-write: ${storage.cow ?? 'none'}) under ${dataDir}, ${tool ? tool.argv.join(' ') : 'no compose tool'}`,
  );
  try {
    await link.run();
  } catch (err) {
    if (err instanceof Refused) {
      log(`refused by the control plane: ${err.message}`);
      return 1;
    }
    throw err;
  }
  await settledWithin(runner.drain(), 10_000);
  return 0;
}

export async function main(argv: string[]): Promise<void> {
  if (argv[0] === PROBE_VERB) return runProbeVerb(argv.slice(1));
  try {
    const opts = parseOptions(argv);
    if (opts.verb === 'version') {
      process.stdout.write(`${VERSION}\n`);
      return;
    }
    if (opts.verb === 'install') {
      await install(opts);
      return;
    }
    // Exit at once: idle keep-alive sockets to the Docker engine would otherwise hold the process.
    process.exit(await runSidecar(opts));
  } catch (err) {
    log((err as Error).message);
    process.exitCode = err instanceof OptionsError ? 2 : 1;
  }
}
