// A fresh stack's network, volumes and containers created through the Engine API, from the same
// rendered compose document `compose up --no-start` would read. The compose CLI is a Go process
// per call that lists the project, inspects the network and the images, then makes the same three
// kinds of create calls: for a one-container sandbox it was a fifth of create → first exec, and a
// steady share of the host's CPU when hundreds of sandboxes start and stop.
//
// What compose would make, made the way compose makes it: the objects carry compose's own labels
// (project, service, container number, network and volume names, version), the containers compose's
// name and network aliases, so every later compose command (a restart's `up --force-recreate`,
// `stop`) and every lookup by label (engine.ts) sees the project as compose's own. Only documents
// whose every key is translated here take this road (`translatable`); anything else, and a project
// that already has objects (a network of that name exists), goes through the compose CLI as before.
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { DockerError, dockerMessage, statusCode } from './errors.ts';

const NETWORK = 'default';
const SERVICE_KEYS = new Set([
  'image',
  'entrypoint',
  'command',
  'user',
  'working_dir',
  'environment',
  'healthcheck',
  'depends_on',
  'volumes',
  'ports',
  'mem_limit',
  'pids_limit',
  'cpus',
  'labels',
  'storage_opt',
  'runtime',
  'security_opt',
  'init',
  'logging',
  'network_mode',
]);
const HEALTH_KEYS = new Set(['test', 'disable', 'interval', 'timeout', 'retries', 'start_period']);

/** The project exists already (a network of its name): compose's own road handles what is there. */
export class ProjectExists extends Error {}

/** Why a document cannot take the Engine road (compose's does it), or null when it can. */
export function untranslatable(doc: Record<string, unknown>): string | null {
  const keys = Object.keys(doc).filter((k) => !['services', 'networks', 'volumes'].includes(k));
  if (keys.length) return `top-level ${keys.join(', ')}`;
  for (const [name, svc] of Object.entries(doc.services as Record<string, Record<string, unknown>>)) {
    for (const key of Object.keys(svc)) if (!SERVICE_KEYS.has(key)) return `${name}: ${key}`;
    if (svc.network_mode !== undefined && svc.network_mode !== 'none')
      return `${name}: network_mode ${String(svc.network_mode)}`;
    // A string is split by compose's shell-words rules: compose does that itself.
    if (typeof svc.command === 'string' || typeof svc.entrypoint === 'string') return `${name}: argv as text`;
    for (const p of (svc.ports as string[] | undefined) ?? []) if (!parsePort(p)) return `${name}: port ${p}`;
    const health = svc.healthcheck as Record<string, unknown> | undefined;
    if (health) {
      for (const key of Object.keys(health)) if (!HEALTH_KEYS.has(key)) return `${name}: healthcheck ${key}`;
      for (const key of ['interval', 'timeout', 'start_period'])
        if (health[key] !== undefined && durationNs(String(health[key])) === null)
          return `${name}: healthcheck ${key} ${String(health[key])}`;
    }
    for (const v of (svc.volumes as unknown[] | undefined) ?? [])
      if (typeof v === 'string' ? v.split(':').length > 3 : (v as { type?: string }).type !== 'bind')
        return `${name}: volume ${JSON.stringify(v)}`;
  }
  return null;
}

/** Compose's `$$` is a literal `$` (render.ts escapes every value): what compose hands Docker. */
const raw = (s: string) => s.replaceAll('$$', '$');

/**
 * A Go duration ('1m30s', '500ms', '2.5s') in nanoseconds; null when it is not one. A scan by
 * hand, no regular expression: the text comes from a user's compose file.
 */
export function durationNs(text: string): number | null {
  const units: Record<string, number> = { ns: 1, us: 1e3, µs: 1e3, ms: 1e6, s: 1e9, m: 60e9, h: 3600e9 };
  if (!text || text.length > 64) return null;
  let total = 0;
  let i = 0;
  while (i < text.length) {
    const start = i;
    while (i < text.length && ((text[i] >= '0' && text[i] <= '9') || text[i] === '.')) i++;
    const num = Number(text.slice(start, i));
    if (start === i || !Number.isFinite(num)) return null;
    const unitStart = i;
    while (i < text.length && !((text[i] >= '0' && text[i] <= '9') || text[i] === '.')) i++;
    const unit = units[text.slice(unitStart, i)];
    if (unit === undefined) return null;
    total += num * unit;
  }
  return Math.round(total);
}

/** '[published:]target[/proto]' (what the spec keeps); ranges go through compose. */
export function parsePort(port: string): { published: string; key: string } | null {
  const [spec, proto = 'tcp', extra] = port.split('/');
  if (extra !== undefined || !['tcp', 'udp', 'sctp'].includes(proto)) return null;
  const parts = spec.split(':');
  const digits = (s: string) => s.length > 0 && s.length <= 5 && [...s].every((c) => c >= '0' && c <= '9');
  if (parts.length > 2 || !parts.every(digits)) return null;
  const target = parts[parts.length - 1];
  return { published: parts.length === 2 ? parts[0] : '', key: `${target}/${proto}` };
}

function healthConfig(h: Record<string, unknown>): Record<string, unknown> {
  if (h.disable) return { Test: ['NONE'] };
  const out: Record<string, unknown> = { Test: (h.test as string[]).map(raw) };
  if (h.interval) out.Interval = durationNs(String(h.interval));
  if (h.timeout) out.Timeout = durationNs(String(h.timeout));
  if (h.start_period) out.StartPeriod = durationNs(String(h.start_period));
  if (h.retries) out.Retries = h.retries;
  return out;
}

/** compose's `depends_on` label: `service:condition:restart`, comma-joined. */
function dependsLabel(deps: Record<string, { condition: string }> | undefined): string {
  return Object.entries(deps ?? {})
    .map(([name, d]) => `${name}:${d.condition}:false`)
    .join(',');
}

export interface Names {
  project: string;
  /** The compose tool's version, as compose labels what it creates. */
  version: string;
  /** The rendered compose file, and its directory (compose's project labels). */
  file: string;
  dir: string;
}

/** Compose labels its objects with its own version, without a packager's suffix ('2.26.1-4'). */
const labelVersion = (version: string) => version.split('-')[0];

/** The container create body of one service (name `<project>-<service>-1`, compose v2's). */
export function containerBody(
  names: Names,
  service: string,
  svc: Record<string, unknown>,
): Docker.ContainerCreateOptions {
  const { project, version } = names;
  // `network_mode: none`: loopback only, no endpoint (render.ts renders it without a network).
  const network = svc.network_mode === 'none' ? 'none' : `${project}_${NETWORK}`;
  const name = `${project}-${service}-1`;
  const binds: string[] = [];
  const mounts: Docker.MountSettings[] = [];
  for (const v of (svc.volumes as unknown[] | undefined) ?? []) {
    if (typeof v === 'string') {
      // Compose spells out the default mode; Docker reports a bind without one differently.
      const [vol, target, mode = 'rw'] = raw(v).split(':');
      binds.push(`${project}_${vol}:${target}:${mode}`);
    } else {
      const b = v as { source: string; target: string; read_only?: boolean };
      mounts.push({ Type: 'bind', Source: raw(b.source), Target: raw(b.target), ReadOnly: !!b.read_only });
    }
  }
  const exposed: Record<string, object> = {};
  const published: Record<string, { HostIp: string; HostPort: string }[]> = {};
  for (const p of (svc.ports as string[] | undefined) ?? []) {
    const port = parsePort(p);
    if (!port) throw new DockerError(`port '${p}' is not one svcd creates itself`);
    exposed[port.key] = {};
    published[port.key] = [...(published[port.key] ?? []), { HostIp: '', HostPort: port.published }];
  }
  const logging = svc.logging as { driver: string; options: Record<string, string> };
  const memory = /^(\d+)m$/.exec(String(svc.mem_limit ?? ''));
  // Compose's order is Go's map order (random); sorted, so one stack renders one way.
  const env = Object.entries((svc.environment as Record<string, string> | undefined) ?? {}).sort(
    ([a], [b]) => (a < b ? -1 : a > b ? 1 : 0),
  );
  const argv = (v: unknown) => (Array.isArray(v) ? v.map((s) => raw(String(s))) : undefined);
  const storage = svc.storage_opt as Record<string, string> | undefined;
  return {
    name,
    Image: String(svc.image),
    AttachStdout: true,
    AttachStderr: true,
    ...(svc.entrypoint !== undefined ? { Entrypoint: argv(svc.entrypoint) } : {}),
    ...(svc.command !== undefined ? { Cmd: argv(svc.command) } : {}),
    ...(svc.user ? { User: raw(String(svc.user)) } : {}),
    ...(svc.working_dir ? { WorkingDir: raw(String(svc.working_dir)) } : {}),
    Env: env.map(([k, v]) => `${k}=${raw(v)}`),
    ...(svc.healthcheck ? { Healthcheck: healthConfig(svc.healthcheck as Record<string, unknown>) } : {}),
    ...(Object.keys(exposed).length ? { ExposedPorts: exposed } : {}),
    Labels: {
      ...((svc.labels as Record<string, string> | undefined) ?? {}),
      'com.docker.compose.project': project,
      'com.docker.compose.service': service,
      'com.docker.compose.container-number': '1',
      'com.docker.compose.oneoff': 'False',
      'com.docker.compose.depends_on': dependsLabel(svc.depends_on as Record<string, { condition: string }>),
      'com.docker.compose.version': labelVersion(version),
      // Compose counts only containers with a config hash as its own. Ours is not compose's hash,
      // so a later `up` recreates the container, which svcd's `up --force-recreate` does anyway.
      'com.docker.compose.config-hash': createHash('sha256').update(JSON.stringify(svc)).digest('hex'),
      'com.docker.compose.project.config_files': names.file,
      'com.docker.compose.project.working_dir': names.dir,
    },
    HostConfig: {
      NetworkMode: network,
      ...(binds.length ? { Binds: binds } : {}),
      ...(mounts.length ? { Mounts: mounts } : {}),
      PortBindings: published,
      ...(memory ? { Memory: Number(memory[1]) * 1024 * 1024 } : {}),
      ...(svc.pids_limit !== undefined ? { PidsLimit: Number(svc.pids_limit) } : {}),
      ...(svc.cpus !== undefined ? { NanoCpus: Math.round(Number(svc.cpus) * 1e9) } : {}),
      ...(storage ? { StorageOpt: storage } : {}),
      ...(svc.runtime ? { Runtime: String(svc.runtime) } : {}),
      SecurityOpt: (svc.security_opt as string[] | undefined) ?? [],
      Init: svc.init === true,
      ExtraHosts: [],
      ...(logging ? { LogConfig: { Type: logging.driver, Config: logging.options } } : {}),
    },
    ...(network === 'none'
      ? {}
      : { NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: [name, service] } } } }),
  };
}

/** The network create body of the project's one network. */
export function networkBody(names: Names, net: Record<string, unknown>): Docker.NetworkCreateOptions {
  const ipam = net.ipam as { config: { subnet: string }[] } | undefined;
  return {
    Name: `${names.project}_${NETWORK}`,
    Driver: String(net.driver ?? 'bridge'),
    CheckDuplicate: true,
    Internal: net.internal === true,
    Options: (net.driver_opts as Record<string, string> | undefined) ?? {},
    ...(ipam ? { IPAM: { Driver: 'default', Config: ipam.config.map((c) => ({ Subnet: c.subnet })) } } : {}),
    Labels: {
      ...((net.labels as Record<string, string> | undefined) ?? {}),
      'com.docker.compose.network': NETWORK,
      'com.docker.compose.project': names.project,
      'com.docker.compose.version': labelVersion(names.version),
    },
  };
}

/** The volume create body of one named volume (a bind of its dataset directory). */
export function volumeBody(
  names: Names,
  volume: string,
  vol: Record<string, unknown>,
): Docker.VolumeCreateOptions {
  const opts = (vol.driver_opts as Record<string, string> | undefined) ?? {};
  return {
    Name: `${names.project}_${volume}`,
    Driver: String(vol.driver ?? 'local'),
    DriverOpts: Object.fromEntries(Object.entries(opts).map(([k, v]) => [k, raw(v)])),
    Labels: {
      ...((vol.labels as Record<string, string> | undefined) ?? {}),
      'com.docker.compose.project': names.project,
      'com.docker.compose.volume': volume,
      'com.docker.compose.version': labelVersion(names.version),
    },
  };
}

/**
 * Creates the network (when the document has one) and the volumes, then every container. Throws
 * ProjectExists when the project's network (nothing created) or a container of its name (only its
 * volumes, which a volume create leaves as they were) is there already; a missing image is a DockerError
 * naming it (compose would pull it: the caller takes compose's road for that).
 */
export async function createFromDocument(
  docker: Docker,
  names: Names,
  doc: Record<string, unknown>,
): Promise<void> {
  const networks = doc.networks as Record<string, Record<string, unknown>> | undefined;
  const services = doc.services as Record<string, Record<string, unknown>>;
  // As compose: a declared volume no service mounts (the project context's) is not created.
  const used = new Set(
    Object.values(services).flatMap((svc) =>
      ((svc.volumes as unknown[] | undefined) ?? []).flatMap((v) =>
        typeof v === 'string' ? [raw(v).split(':')[0]] : [],
      ),
    ),
  );
  const declared = (doc.volumes as Record<string, Record<string, unknown>> | undefined) ?? {};
  const volumes = Object.fromEntries(Object.entries(declared).filter(([name]) => used.has(name)));
  if (networks?.[NETWORK]) {
    try {
      await docker.createNetwork(networkBody(names, networks[NETWORK]));
    } catch (err) {
      if (statusCode(err) === 409) throw new ProjectExists(dockerMessage(err));
      throw new DockerError(`network ${names.project}_${NETWORK}: ${dockerMessage(err)}`);
    }
  }
  await Promise.all(
    Object.entries(volumes).map(async ([name, vol]) => {
      try {
        await docker.createVolume(volumeBody(names, name, vol));
      } catch (err) {
        throw new DockerError(`volume ${names.project}_${name}: ${dockerMessage(err)}`);
      }
    }),
  );
  const created = await Promise.allSettled(
    Object.entries(services).map(async ([service, svc]) => {
      try {
        await docker.createContainer(containerBody(names, service, svc));
      } catch (err) {
        if (statusCode(err) === 409) throw new ProjectExists(dockerMessage(err));
        if (statusCode(err) === 404) throw new NoImage(String(svc.image), dockerMessage(err));
        throw new DockerError(`creating service '${service}': ${dockerMessage(err)}`);
      }
    }),
  );
  const failed = created.find((c) => c.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

/** A service's image is not on the host: compose's road pulls it (or says why it cannot). */
export class NoImage extends DockerError {
  readonly image: string;
  constructor(image: string, detail: string) {
    super(`image ${image}: ${detail}`);
    this.image = image;
  }
}
