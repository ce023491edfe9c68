// svc-server: open and migrate the database, bootstrap the first team, serve HTTP and the host
// stream, and shut down cleanly. The lifecycle is explicit: starting → serving → stopping → stopped.
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { Facts } from '../shared/facts.ts';
import { type Fault, Faults, guard } from '../shared/faults.ts';
import { SecretBox } from './clouds/secret-box.ts';
import { Cluster } from './cluster/cluster.ts';
import { Lease } from './cluster/leases.ts';
import type { ReplicaTiming } from './cluster/replica.ts';
import { OAuthStates } from './codehost/oauth.ts';
import { WebhookIntake } from './codehost/webhook-intake.ts';
import { type Config, ConfigError, devLoginWarning, localUrl, parseConfig } from './config/config.ts';
import type { AppContext } from './context.ts';
import { openDb } from './db/open.ts';
import { type DevSidecar, saveDevKey, startDevSidecar } from './dev.ts';
import { createE2bApp, type E2bServer } from './e2b/app.ts';
import { VERSION_SERVICES_MAX } from './envs/io.ts';
import { EventBus } from './events/bus.ts';
import { consumeJoinToken, mintJoinToken, recordJoinedHost } from './hosts/join-tokens.ts';
import { ensureDriverHosts } from './hosts/targets.ts';
import { type App, createHttpApp } from './http/app.ts';
import { installCors } from './http/cors.ts';
import { type HttpLimits, httpLimits } from './http/limits.ts';
import { installRateLimits } from './http/rate-limits.ts';
import type { Lifecycle } from './http/readiness.ts';
import { Authenticator, installAuth } from './identity/auth.ts';
import { bootstrap } from './identity/store.ts';
import { createOrchestrator, type Orchestrator, type OrchestratorOptions } from './orchestrator.ts';
import { REFILL_LEASE, REFILL_LEASE_MS, WarmPool } from './pool/pool.ts';
import { processUpgrades } from './processes/ws.ts';
import { createDrivers, createProvisioners } from './providers/index.ts';
import { registerRoutes } from './routes.ts';
import { SWEEP_LEASE, SWEEP_LEASE_MS, UploadSweeper } from './uploads/sweep.ts';

export const VERSION = process.env.SVC_BUILD_VERSION || 'dev';
export const SHUTDOWN_WAIT_MS = 10_000;
/**
 * Connections the kernel may hold for the HTTP listener before it accepts them (it caps this at
 * net.core.somaxconn). When a replica dies, every host it held dials a survivor within the first
 * backoff's jitter, thousands within a quarter second; with Node's default of 511 the rest were
 * turned away and their handshakes waited on the kernel's retransmits, some past a sidecar's
 * handshake timeout.
 */
export const LISTEN_BACKLOG = 8192;
/** The exit status after a fault that made continuing unsafe (sysexits' EX_SOFTWARE). */
export const EXIT_UNSAFE = 70;

/** SQLite result codes (low byte) that say the database file itself is damaged. */
const SQLITE_DAMAGED = new Set([11 /* SQLITE_CORRUPT */, 26 /* SQLITE_NOTADB */]);

/** A fault after which the control plane must not go on: its database file is damaged. */
export function serverUnsafe(fault: Fault): string | null {
  const errcode = (fault.error as { errcode?: unknown } | null)?.errcode;
  if (typeof errcode === 'number' && SQLITE_DAMAGED.has(errcode & 0xff))
    return `the database file is damaged (${(fault.error as Error).message})`;
  return null;
}

export type { Lifecycle } from './http/readiness.ts';

export interface Server {
  app: App;
  ctx: AppContext;
  orchestrator: Orchestrator;
  url: string;
  /** The E2B-compatible listener (SVC_E2B_ADDR), when on. */
  e2b: (E2bServer & { url: string }) | null;
  /** This process among the control-plane replicas on one database: the holder of its leases. */
  replicaId: string;
  /** The uploads sweep (runs on the replica holding its lease). */
  sweeper: UploadSweeper;
  state(): Lifecycle;
  close(): Promise<void>;
}

export interface StartOptions {
  /** A pino logger or `false` (tests); default: pino at info, debug with -v. */
  logger?: FastifyBaseLogger | false;
  /** Where the generated bootstrap key is printed; stderr by default. */
  announce?: (line: string) => void;
  /** Provisioners and drivers to plug in (tests use fakes that speak the providers' APIs). */
  orchestrator?: Pick<OrchestratorOptions, 'provisioners' | 'drivers'>;
  /** HTTP timeouts, caps and rate limits that differ from the defaults (tests, benchmarks). */
  limits?: Partial<HttpLimits>;
  /** The replica's heartbeat and lease (tests shorten them). */
  replica?: Partial<ReplicaTiming>;
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<Server> {
  let state: Lifecycle = 'starting';
  const logger =
    opts.logger ?? ({ level: config.verbose ? 'debug' : 'info' } as unknown as FastifyBaseLogger);
  const secrets = SecretBox.load(config.secretsKey, config.db);
  const { db, steps } = await openDb(
    config.db,
    { sealConfig: (c) => secrets.sealConfig(c) },
    config.dbPoolSize,
  );
  const announce = opts.announce ?? ((line: string) => process.stderr.write(`${line}\n`));
  const app = await createHttpApp({
    logger: logger === false ? false : logger,
    version: VERSION,
    verbose: config.verbose,
    limits: httpLimits(opts.limits),
  });
  app.log.info(
    { db: config.dbRedacted, migrations: steps.filter((s) => s.status === 'applied').length },
    'database ready',
  );
  app.log.info({ secrets_key: secrets.source }, 'provider tokens sealed with AES-256-GCM');
  const faults = new Faults({ log: (line) => app.log.error(line), unsafe: serverUnsafe });
  // Before anything is written: a second replica on a database for one is refused here.
  const lease = config.replicaLeaseMs;
  const cluster = new Cluster(db, app.log, { leaseMs: lease, heartbeatMs: lease / 5, ...opts.replica });
  try {
    await cluster.start();
  } catch (err) {
    await cluster.close().catch(() => {});
    await app.close().catch(() => {});
    await db.close().catch(() => {});
    faults.close();
    throw err;
  }
  app.log.info({ replica: cluster.id, shared: cluster.shared }, 'replica registered');
  // Names this process as the holder of leases too (one replica at a time runs a periodic job).
  const replicaId = cluster.id;
  const boot = await bootstrap(db, config.team, config.bootstrapKey);
  if (boot) {
    app.log.info({ team: boot.team.Name }, 'bootstrapped first team');
    if (boot.generated) announce(`bootstrap API key for team ${boot.team.Name} (shown once): ${boot.apiKey}`);
  }
  const auth = new Authenticator(db);
  // Known once listening: where the other replicas reach this one unless SVC_REPLICA_URL says.
  let listening = '';
  // Where other replicas reach this one (blob relays, the replicas table): SVC_REPLICA_PEER_URL,
  // else SVC_REPLICA_URL, else the address it listens on once it does.
  const ownUrl = () =>
    config.replicaPeerUrl || config.replicaUrl || listening || localUrl(config.host, config.port);
  const events = new EventBus(
    db,
    {},
    cluster.shared ? (teamId, ids) => cluster.broadcast({ k: 'evt', t: teamId, ids }) : undefined,
  );
  cluster.on('events', ({ teamId, ids }) => events.heard(teamId, ids));
  cluster.on('keyRevoked', ({ keyId }) => auth.forgetKey(keyId));
  cluster.on('resync', () => auth.forgetAll());
  const orch: Orchestrator = createOrchestrator(db, config, app.log, {
    replica: replicaId,
    consumeJoinToken: async (q, token) => {
      const r = await consumeJoinToken(q, token);
      return typeof r === 'string' ? { error: r } : r;
    },
    onJoined: (token, hostId) => recordJoinedHost(db, token, hostId),
    mintJoinToken: async (teamId, cloudId) => (await mintJoinToken(db, teamId, cloudId)).token,
    ensureDriverHosts: (teamId) => ensureDriverHosts(db, teamId),
    drivers: createDrivers(db, secrets),
    provisioners: createProvisioners(secrets),
    events,
    replicaUrl: ownUrl,
    cluster,
    ...opts.orchestrator,
  });
  // The warm pool works through the context it is a member of; built right after it.
  let pool: WarmPool | undefined;
  const ctx: AppContext = {
    config,
    lifecycle: { state: () => state },
    db,
    cluster,
    auth,
    hub: orch.hosts,
    dispatcher: orch.dispatcher,
    targets: orch.targets,
    engine: orch.engine,
    blobs: orch.blobs,
    events,
    secrets,
    faults,
    versionServices: new Facts<string[]>(VERSION_SERVICES_MAX),
    oauthStates: new OAuthStates(db),
    webhookIntake: new WebhookIntake(),
    get pool() {
      if (!pool) throw new Error('the warm pool is read before the context was built');
      return pool;
    },
    processes: orch.processes,
  };
  pool = new WarmPool(ctx, new Lease(db, REFILL_LEASE, replicaId, REFILL_LEASE_MS));
  installCors(app, config.consoleUrl);
  await installRateLimits(app, httpLimits(opts.limits), db);
  installAuth(app, auth);
  orch.blobs.routes(app);
  await registerRoutes(app, ctx);
  const sweeper = new UploadSweeper(
    db,
    config.uploadsDir,
    config.uploadsGraceMs,
    app.log,
    new Lease(db, SWEEP_LEASE, replicaId, SWEEP_LEASE_MS),
  );
  const { recovered, failedCommands } = await orch.start(app.server, processUpgrades(ctx, app.log));
  if (recovered || failedCommands) {
    app.log.warn({ recovered, failedCommands }, 'finished work a previous process left running');
  }
  await app.listen({ host: config.host, port: config.port, backlog: LISTEN_BACKLOG });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const url = localUrl(config.host, port);
  listening = url;
  await cluster.replica.setUrl(ownUrl()).catch(() => {});
  const e2b = config.e2b ? await listenE2b(ctx, config.e2b, logger, opts.limits) : null;
  state = 'serving';
  sweeper.start(config.uploadsSweepMs);

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      state = 'stopping';
      // Draining: /ready answers 503 while every request is still served, so the load balancer
      // takes this replica out of rotation before it stops listening.
      if (config.drainMs > 0) await sleep(config.drainMs);
      // Stop accepting, wait up to 10 s for in-flight requests, then cut what is left.
      const timer = setTimeout(
        guard('shutdown: cut connections', () => app.server.closeAllConnections()),
        SHUTDOWN_WAIT_MS,
      );
      // A keep-alive connection whose request finishes during shutdown is closed once idle, so a
      // client holding it open cannot delay the exit.
      const sweep = setInterval(
        guard('shutdown: close idle connections', () => app.server.closeIdleConnections()),
        100,
      );
      await sweeper.stop();
      await e2b?.close();
      await orch.close();
      await app.close().catch(() => {});
      // After the hub's streams closed: the others take over what this replica held at once.
      await cluster.close().catch(() => {});
      events.close();
      clearTimeout(timer);
      clearInterval(sweep);
      await db.close();
      faults.close();
      state = 'stopped';
    })();
    return closing;
  };
  return { app, ctx, orchestrator: orch, url, e2b, replicaId, sweeper, state: () => state, close };
}

/** The E2B-compatible surface on its own address, sharing the context. */
async function listenE2b(
  ctx: AppContext,
  addr: { host: string; port: number },
  logger: FastifyBaseLogger | false,
  limits: Partial<HttpLimits> | undefined,
): Promise<E2bServer & { url: string }> {
  const e2b = await createE2bApp(ctx, { logger, version: VERSION, limits });
  await e2b.app.listen({ host: addr.host, port: addr.port });
  const bound = e2b.app.server.address();
  const url = localUrl(addr.host, typeof bound === 'object' && bound ? bound.port : addr.port);
  e2b.app.log.info({ addr: url }, 'E2B-compatible API and envd listening');
  return { ...e2b, url };
}

/** The program: parse flags, start, and stop on SIGINT/SIGTERM. */
export async function main(argv: string[]): Promise<void> {
  let config: Config;
  try {
    config = parseConfig(argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`svc-server: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const say = (line: string) => process.stderr.write(`${line}\n`);
  let server: Server;
  let dev: DevSidecar | null = null;
  try {
    server = await startServer(config, {
      // In dev mode a generated key is also kept on disk, so a restart does not lose it.
      announce: config.dev
        ? (line) => {
            say(line);
            const key = /(dak_\S+)$/.exec(line)?.[1];
            if (key) say(`(also saved to ${saveDevKey(key)})`);
          }
        : undefined,
    });
    if (config.dev) dev = await startDevSidecar(server.ctx.db, server.url, say);
  } catch (err) {
    process.stderr.write(`svc-server: ${(err as Error).message}\n`);
    process.exit(1);
  }
  // Before the line that says it listens: a supervisor may send SIGTERM as soon as it reads it,
  // and a signal with no handler yet ends the process without shutting down.
  const stop = async (signal: string) => {
    server.app.log.info({ signal }, 'shutting down');
    await dev?.stop();
    await server.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
  // Before the line that says it listens (stderr on a pipe is written synchronously).
  const warning = devLoginWarning(config);
  if (warning) say(warning);
  server.app.log.info(
    { addr: `${config.host}:${config.port}`, public_url: config.publicUrl },
    'svc-server listening',
  );
  if (config.dev && server.e2b)
    say(`E2B SDK: E2B_API_URL=${server.e2b.url} E2B_SANDBOX_URL=${server.e2b.url} E2B_API_KEY=<a dak_ key>`);

  // A throw nothing caught is logged with its stack and counted (svc_uncaught_errors_total), and
  // the control plane goes on serving; it exits only where going on would be unsafe, for its
  // supervisor to start it again (release/svc-server.service: Restart=always).
  server.ctx.faults.installProcessHandlers(process, (reason) => {
    server.app.log.fatal({ reason }, `svc-server: exiting: ${reason}`);
    say(`svc-server: exiting: ${reason}`);
    process.exit(EXIT_UNSAFE);
  });
}
