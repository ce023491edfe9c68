// One environment's compose stack: render, up (with health wait), stop/start, down, and what the
// env.create result reports about it (endpoints, digests). Deny stacks get their host firewall
// rules before any container starts and lose them only after every container is gone.
import { mkdir } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import {
  CONTEXT_VOLUME,
  type Egress,
  type NetworkMode,
  type Runtime,
  type ServiceRecord,
} from '../../protocol/spec.ts';
import { writeFileAtomic } from '../../shared/atomic-file.ts';
import { AGAIN, retry, retryFailures } from '../../shared/concurrency.ts';
import { Timings } from '../../shared/timings.ts';
import { startActive } from './active-health.ts';
import { type StagedBinds, stageBinds, unstageBinds } from './bind-staging.ts';
import { type ComposeTool, runCompose } from './compose-tool.ts';
import { type ProbeOptions, type ProbeReport, verifyEgress } from './egress.ts';
import { DockerEngine, dockerClient, type EngineState, PROJECT_LABEL } from './engine.ts';
import { createFromDocument, NoImage, ProjectExists, untranslatable } from './engine-create.ts';
import { ComposeRunError, DockerError, dockerMessage } from './errors.ts';
import { type FirewallOptions, isolateBridge, releaseBridge } from './firewall.ts';
import { diagnose, type WaitOptions, waitHealthy } from './health.ts';
import { primaryIPv4 } from './hostip.ts';
import { bridgeName, composeDocument, composeText, networkName, projectName } from './render.ts';
import type { SubnetAllocator } from './subnets.ts';

export interface StackSpec {
  services: ServiceRecord[];
  volumes: string[];
  egress: Egress;
  /** The runtime the services run under (render.ts names runsc for gvisor); runc when absent. */
  runtime?: Runtime;
  /** `none`: no network, so no subnet, no bridge and no firewall rules (render.ts). */
  network?: NetworkMode;
}

export interface StackOptions {
  envId: string;
  /** Where compose.yaml is written: `<data>/envs/<env id>`. */
  dir: string;
  spec: StackSpec;
  tool: ComposeTool;
  /** volume → dataset directory; needed by `up` (rendering), not by `down`. */
  volumePaths?: Record<string, string>;
  docker?: Docker;
  /** The sidecar's Docker state, shared by every stack of the process (engine.ts). */
  engineState: EngineState;
  /** Seconds containers get to stop before SIGKILL. Default 10. */
  stopTimeoutSec?: number;
  /** Host part of endpoints; default the host's primary IPv4 address. */
  endpointHost?: string;
  firewall?: FirewallOptions;
  /** Gives the stack's network a subnet of its own; Docker's pools when absent. */
  subnets?: SubnetAllocator;
  /** The engine bounds writable layers: services' `storage_opt` sizes are rendered. */
  layerQuota?: boolean;
  /** Where relative binds are staged (bind-staging.ts); a stack with binds cannot start without it. */
  stageDir?: string;
  /** Create through the compose CLI even where the Engine API could (the parity test's baseline). */
  composeCreate?: boolean;
}

export class Stack {
  readonly envId: string;
  readonly project: string;
  readonly network: string;
  readonly bridge: string;
  readonly composeFile: string;
  readonly engine: DockerEngine;
  readonly spec: StackSpec;
  readonly tool: ComposeTool;
  private readonly opts: StackOptions;
  /** Where each relative bind was staged by the latest `up`. */
  private staged: StagedBinds = {};
  /** The document the latest `write` rendered. */
  private doc: Record<string, unknown> = {};

  constructor(opts: StackOptions) {
    this.opts = opts;
    this.envId = opts.envId;
    this.project = projectName(opts.envId);
    this.network = networkName(opts.envId);
    this.bridge = bridgeName(opts.envId);
    this.composeFile = join(opts.dir, 'compose.yaml');
    this.engine = new DockerEngine(this.project, opts.docker ?? dockerClient(), opts.engineState);
    this.spec = opts.spec;
    this.tool = opts.tool;
  }

  /** Whether the stack has a network of its own (every stack but network mode `none`). */
  get networked(): boolean {
    return this.spec.network !== 'none';
  }

  /** Whether the stack's bridge gets host firewall rules: a deny stack with a network. */
  private get firewalled(): boolean {
    return this.spec.egress === 'deny' && this.networked;
  }

  private get stopTimeout(): string {
    return String(this.opts.stopTimeoutSec ?? 10);
  }

  private compose(args: string[], timeoutMs?: number) {
    return runCompose(this.tool, { project: this.project, file: this.composeFile }, args, timeoutMs);
  }

  /** Renders the compose file and writes it atomically; returns its text. */
  async write(): Promise<string> {
    const subnet = this.networked ? await this.opts.subnets?.allocate(this.envId) : undefined;
    this.doc = composeDocument({
      envId: this.envId,
      ...this.spec,
      volumePaths: this.opts.volumePaths ?? {},
      stagedBinds: this.staged,
      hostCpus: availableParallelism(),
      subnet,
      layerQuota: this.opts.layerQuota,
    });
    const text = composeText(this.envId, this.doc);
    await mkdir(this.opts.dir, { recursive: true });
    await writeFileAtomic(this.composeFile, text);
    return text;
  }

  /**
   * Renders, then starts the stack and waits until every service is healthy (or running when it
   * has no healthcheck). Returns the milliseconds from the start of `up` to healthy.
   *
   * Two steps: the containers are (re)created first without starting (`--force-recreate`; Docker
   * copies an image's content and owner into an empty volume at create time), then `beforeStart`
   * runs (e.g. giving a fresh volume to the service's non-root user), then the sidecar starts them
   * itself in dependency order, checking health actively (active-health.ts). With `deferStayUp`
   * a check-less service may still be inside its stay-up window: `stayUp` says when it is over.
   */
  async up(
    timeoutSec = 600,
    beforeStart?: () => Promise<void>,
    onStart?: (service: string) => void,
    timings = new Timings(),
    deferStayUp = false,
  ): Promise<{ started_in: number; stayUp: Promise<void> | null }> {
    await timings.step('stage_binds', () => this.stage());
    await timings.step('render', () => this.write());
    const started = Date.now();
    const create = ['up', '--no-start', '--force-recreate', '--remove-orphans'];
    if (this.tool.flavor === 'v2') create.splice(2, 0, '--quiet-pull');
    // A deny stack's rules are written while its containers are created (a created container
    // sends nothing), and both are settled before any starts: a failure of either is thrown only
    // once the other is done, so the cleanup that follows never races a rule still being added.
    const [isolated, created] = await Promise.allSettled([
      this.firewalled
        ? timings.step('firewall', () => isolateBridge(this.bridge, this.envId, this.opts.firewall))
        : undefined,
      timings.step('compose_create', () => this.createContainers(create, (timeoutSec + 60) * 1000)),
    ]);
    if (isolated.status === 'rejected') throw isolated.reason;
    if (created.status === 'rejected') {
      const err = created.reason;
      if (!(err instanceof ComposeRunError)) throw err;
      // Compose names the failing container; the engine can say why (exit code, health output, logs).
      throw (await diagnose(this.engine, this.spec.services, err.stderr)) ?? err;
    }
    if (beforeStart) await timings.step('before_start', beforeStart);
    const left = timeoutSec * 1000 - (Date.now() - started);
    const { stayUp } = await timings.step('start_health', () =>
      startActive(this.engine, this.spec.services, { timeoutMs: Math.max(left, 1000), onStart, deferStayUp }),
    );
    return { started_in: Date.now() - started, stayUp };
  }

  /**
   * Pins and mounts every relative bind afresh (bind-staging.ts), before any container exists:
   * what was checked is what each container gets, whatever a service started earlier does.
   */
  private async stage(): Promise<void> {
    const binds = this.spec.services.some((s) => s.binds?.length);
    if (!this.opts.stageDir) {
      if (binds) throw new DockerError('this stack has relative binds but no staging directory');
      return;
    }
    this.staged = await stageBinds(
      this.opts.stageDir,
      this.opts.volumePaths?.[CONTEXT_VOLUME],
      this.spec.services,
    );
  }

  /**
   * Creates the project's objects: a fresh project through the Engine API (engine-create.ts), one
   * that exists already, or whose document or image only compose handles, by `up --no-start`.
   * When another sidecar on this engine took the same subnet a moment earlier (Docker: "Pool
   * overlaps"), the allocation is dropped and made again, now seeing that network.
   */
  private async createContainers(args: string[], timeoutMs: number): Promise<void> {
    const { subnets } = this.opts;
    let engine = !this.opts.composeCreate && untranslatable(this.doc) === null;
    await retryFailures(
      async (n) => {
        if (n > 0) await this.write();
        if (engine) {
          try {
            const names = {
              project: this.project,
              version: this.tool.version,
              file: this.composeFile,
              dir: this.opts.dir,
            };
            return await createFromDocument(this.engine.docker, names, this.doc);
          } catch (err) {
            if (!(err instanceof ProjectExists || err instanceof NoImage)) throw err;
            engine = false;
          }
        }
        await this.compose(args, timeoutMs);
      },
      {
        attempts: 5,
        when: async (err) => {
          const text =
            err instanceof ComposeRunError ? err.stderr : err instanceof DockerError ? err.message : '';
          if (!subnets || !/overlaps/i.test(text)) return false;
          await subnets.release(this.envId);
          return true;
        },
        // Jitter, so two sidecars that just collided do not rescan in step.
        backoff: { baseMs: 50, capMs: 1000, jitter: 4 },
      },
    );
  }

  /**
   * Waits until every service but `opts.skip` is healthy; StackUnhealthy with the failing one's
   * logs otherwise. `opts.before`: what was healthy just before a freeze (health.ts `healthyBefore`).
   */
  async waitHealthy(timeoutMs: number, opts: WaitOptions = {}): Promise<void> {
    await waitHealthy(this.engine, this.spec.services, timeoutMs, opts);
  }

  async stop(): Promise<void> {
    await this.compose(['stop', '-t', this.stopTimeout]);
  }

  /** Starts stopped containers again (firewall rules first) and waits for health. */
  async start(timeoutSec = 600): Promise<void> {
    if (this.firewalled) await isolateBridge(this.bridge, this.envId, this.opts.firewall);
    await startActive(this.engine, this.spec.services, { timeoutMs: timeoutSec * 1000 });
  }

  /**
   * Removes the containers, the network and the volumes' Docker objects (the data stays in the
   * dataset directories), the staged binds, then the firewall rules. Works without a compose file (after a crash).
   * No stop grace: every caller (destroy, rollback, a failed create or fork) discards or replaces
   * the data next, so a clean shutdown buys nothing and a 10 s grace made each grader fork's
   * teardown, and so every verify, 10 s slower. Through the Engine API by the project's labels,
   * what `compose down -v -t 0` does without starting the compose CLI (one CLI process
   * per destroy cost more CPU than the removals themselves).
   */
  async down(): Promise<void> {
    const docker = this.engine.docker;
    const label = (key: string) => ({ label: [`${key}=${this.project}`] });
    try {
      const containers = await docker.listContainers({ all: true, filters: label(PROJECT_LABEL) });
      await Promise.all(containers.map((c) => removeContainer(docker.getContainer(c.Id))));
      const networks = await docker.listNetworks({ filters: label(PROJECT_LABEL) });
      await Promise.all(networks.map((n) => gone(docker.getNetwork(n.Id).remove())));
      const { Volumes } = await docker.listVolumes({ filters: label(PROJECT_LABEL) });
      await Promise.all((Volumes ?? []).map((v) => gone(docker.getVolume(v.Name).remove())));
    } catch (err) {
      throw new DockerError(`removing ${this.project}: ${dockerMessage(err)}`);
    }
    // No container is left to use the staged binds: nothing of them stays on the host.
    if (this.opts.stageDir) await unstageBinds(this.opts.stageDir);
    // A stack without a network never had rules; one without a spec (after a crash) is looked up.
    if (this.networked) await releaseBridge(this.bridge, this.envId, this.opts.firewall);
  }

  /** Runs the egress probe; a deny leak stops the stack and throws EgressLeak. */
  async verifyEgress(opts: ProbeOptions = {}): Promise<ProbeReport> {
    return verifyEgress(
      {
        engine: this.engine,
        network: this.networked ? this.network : null,
        egress: this.spec.egress,
        stop: () => this.stop(),
      },
      opts,
    );
  }

  /** service → `host:port` of its first published port; empty for deny stacks. */
  async endpoints(): Promise<Record<string, string>> {
    if (this.spec.egress === 'deny') return {};
    const host = this.opts.endpointHost ?? (await primaryIPv4());
    const out: Record<string, string> = {};
    for (const svc of this.spec.services) {
      if (!svc.ports.length) continue;
      const ports = (await this.engine.inspect(svc.name)).NetworkSettings.Ports ?? {};
      for (const port of svc.ports) {
        const [, target, proto] = /^(?:[\d-]+:)?(\d+)(?:-\d+)?(?:\/(\w+))?$/.exec(port) ?? [];
        const bindings = (ports[`${target}/${proto ?? 'tcp'}`] ?? []) as {
          HostIp: string;
          HostPort: string;
        }[];
        const binding = bindings.find((b) => !b.HostIp.includes(':')) ?? bindings[0];
        if (binding?.HostPort) {
          out[svc.name] = `${host}:${binding.HostPort}`;
          break;
        }
      }
    }
    return out;
  }

  /** service → `repo@sha256:…` (the repo digest of its image), or the image id for unpushed images. */
  async digests(): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    const containers = await this.engine.containers();
    for (const svc of this.spec.services) {
      const c = containers.find((x) => x.service === svc.name);
      if (!c) continue;
      let info: Docker.ImageInspectInfo;
      try {
        info = await this.engine.docker.getImage(c.imageId).inspect();
      } catch (err) {
        throw new DockerError(`image of service '${svc.name}': ${dockerMessage(err)}`);
      }
      out[svc.name] = pickDigest(svc.image, info.RepoDigests ?? []) ?? info.Id;
    }
    return out;
  }
}

/** The repo digest matching the image reference's repository, else the first one. */
export function pickDigest(image: string, repoDigests: string[]): string | undefined {
  const repo = normaliseRepo(image.split('@')[0].replace(/:[^/:]+$/, ''));
  return repoDigests.find((d) => normaliseRepo(d.split('@')[0]) === repo) ?? repoDigests[0];
}

function normaliseRepo(repo: string): string {
  let r = repo;
  const first = r.split('/')[0];
  if (!r.includes('/') || !(first.includes('.') || first.includes(':') || first === 'localhost'))
    r = `docker.io/${r.includes('/') ? r : `library/${r}`}`;
  return r;
}

/**
 * Removes a container; when another removal of it is under way (a concurrent down), waits until
 * it is gone, so the network can go next.
 */
async function removeContainer(c: Docker.Container): Promise<void> {
  try {
    await gone(c.remove({ force: true, v: true }));
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 409) throw err;
    await retry(
      async (n) => {
        try {
          await c.inspect();
        } catch (e) {
          if ((e as { statusCode?: number }).statusCode === 404) return;
          throw e;
        }
        if (n >= 300) throw err; // 30 s: the other removal is stuck; say why
        return AGAIN;
      },
      { delayMs: 100 },
    );
  }
}

/** Settles when the object was removed or was already gone (a concurrent removal). */
async function gone(removal: Promise<unknown>): Promise<void> {
  try {
    await removal;
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode !== 404) throw err;
  }
}
