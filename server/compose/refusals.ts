// What the sidecar cannot honour (refused, with the key, the service and the way out) and what it
// manages itself (dropped with a warning). Everything else a service may carry is parsed elsewhere.
import { asList, asMap, fail, isMap, type Node, type NodeMap, scalarText } from './tree.ts';

/** Service keys the sidecar manages itself or that do not change what the stack computes. */
// biome-ignore format: one keyword list reads better packed
export const DROPPED_SERVICE_KEYS = new Set([
  'restart', 'container_name', 'networks', 'expose', 'labels', 'label_file', 'logging', 'stdin_open', 'tty',
  'init', 'stop_grace_period', 'stop_signal', 'hostname', 'domainname', 'ulimits', 'platform', 'pull_policy',
  'pull_refresh_after', 'shm_size', 'extra_hosts', 'dns', 'dns_opt', 'dns_search', 'links', 'external_links',
  'annotations', 'attach', 'develop', 'cap_drop', 'security_opt', 'read_only', 'tmpfs', 'mac_address', 'sysctls',
  'oom_score_adj', 'oom_kill_disable', 'mem_reservation', 'mem_swappiness', 'memswap_limit', 'cpu_shares',
  'cpu_quota', 'cpu_period', 'cpu_rt_period', 'cpu_rt_runtime', 'cpuset', 'cpu_count', 'cpu_percent',
  'blkio_config', 'cgroup_parent', 'credential_spec', 'isolation', 'group_add', 'scale',
]);

const nonEmpty = (v: Node): boolean =>
  v !== null && v !== false && !(Array.isArray(v) && v.length === 0) && !(isMap(v) && v.size === 0);
const isTrue = (v: Node): boolean => v === true || v === 'true';
const NAMESPACE_WAY_OUT = "containers never share the host's or another container's namespaces";

interface Rule {
  /** The refused form of the value, for the message; null when the value is harmless. */
  refused(value: Node): string | null;
  reason: string;
}

const always = (label: string) => (v: Node) => (nonEmpty(v) ? label : null);
const sharing = (key: string) => (v: Node) => {
  const text = typeof v === 'string' ? v : '';
  return text === 'host' || /^(service|container):/.test(text) ? `${key}: ${text}` : null;
};

const RULES: Record<string, Rule> = {
  privileged: {
    refused: (v) => (isTrue(v) ? 'privileged: true' : null),
    reason: 'containers never run privileged: remove privileged',
  },
  cap_add: { refused: always('cap_add'), reason: 'containers get no extra capabilities: remove cap_add' },
  devices: { refused: always('devices'), reason: 'host devices are not passed through: remove devices' },
  device_cgroup_rules: {
    refused: always('device_cgroup_rules'),
    reason: 'host devices are not passed through: remove it',
  },
  gpus: { refused: always('gpus'), reason: 'GPUs are not passed through: remove gpus' },
  network_mode: {
    refused: (v) =>
      typeof v === 'string' && !['none', 'bridge', 'default'].includes(v) ? `network_mode: ${v}` : null,
    reason:
      "every service joins the stack's own network (x-svc.egress decides internet access): remove network_mode " +
      'and reach other services by their service name',
  },
  pid: { refused: sharing('pid'), reason: `${NAMESPACE_WAY_OUT}: remove pid` },
  ipc: { refused: sharing('ipc'), reason: `${NAMESPACE_WAY_OUT}: remove ipc` },
  uts: { refused: sharing('uts'), reason: `${NAMESPACE_WAY_OUT}: remove uts` },
  userns_mode: { refused: sharing('userns_mode'), reason: `${NAMESPACE_WAY_OUT}: remove userns_mode` },
  cgroup: { refused: sharing('cgroup'), reason: `${NAMESPACE_WAY_OUT}: remove cgroup` },
  env_file: {
    refused: always('env_file'),
    reason:
      "files next to the compose file are read only from the project context: deploy with it (`svc deploy` uploads the compose file's directory) " +
      'or put the variables under environment: (with $' +
      '{VAR} interpolation)',
  },
  extends: {
    refused: always('extends'),
    reason: 'other files are never read: use YAML anchors and merge keys (<<:) in this file',
  },
  volumes_from: {
    refused: always('volumes_from'),
    reason: 'mounts are not shared between containers that way: mount the same named volume in both services',
  },
  use_api_socket: {
    refused: (v) => (isTrue(v) ? 'use_api_socket: true' : null),
    reason: 'the container engine is never exposed: remove it',
  },
  provider: {
    refused: always('provider'),
    reason: 'provider services are not run by the sidecar: use an image',
  },
  models: {
    refused: always('models'),
    reason: 'models are not provided by the sidecar: run the model server as a service',
  },
  post_start: {
    refused: always('post_start'),
    reason: 'lifecycle hooks are not run: move the command into the entrypoint',
  },
  pre_stop: { refused: always('pre_stop'), reason: 'lifecycle hooks are not run: remove pre_stop' },
  runtime: {
    refused: (v) => (typeof v === 'string' && v !== 'runc' ? `runtime: ${v}` : null),
    reason: "every container runs with the host's default runtime: remove runtime",
  },
};

export function isRuledKey(key: string): boolean {
  return Object.hasOwn(RULES, key);
}

/** Throws for a refused value; returns the key when the value is harmless and merely dropped. */
export function checkRuledKey(service: string, key: string, value: Node): void {
  const hit = RULES[key].refused(value);
  if (hit) {
    fail(`service '${service}': ${hit} is refused; ${RULES[key].reason}`);
  }
}

/** How a top-level secret or config gets its content, for the refusal message. */
export type Backings = Map<string, string>;

export function parseBackings(node: Node | undefined, kind: 'secrets' | 'configs'): Backings {
  const out: Backings = new Map();
  for (const [name, decl] of asMap(node, kind)) {
    const map = asMap(decl, `${kind}.${name}`);
    out.set(name, backing(map));
  }
  return out;
}

function backing(map: NodeMap): string {
  if (map.has('file')) {
    return `is backed by the host file '${scalarText(map.get('file'), 'file')}'`;
  }
  if (map.has('environment')) {
    return `comes from the variable '${scalarText(map.get('environment'), 'environment')}' of the compose process`;
  }
  if (map.has('external')) {
    return 'is external';
  }
  if (map.has('content')) {
    return 'has inline content';
  }
  return 'is declared';
}

/** Service-level `secrets:` / `configs:`: the sidecar mounts neither, so any use is refused. */
export function checkSecretUse(
  service: string,
  kind: 'secrets' | 'configs',
  node: Node,
  declared: Backings,
): void {
  const items = asList(node, `service '${service}': ${kind}`);
  if (items.length === 0) {
    return;
  }
  const first = items[0];
  const name = isMap(first)
    ? scalarText(first.get('source'), `${kind}[0].source`)
    : scalarText(first, `${kind}[0]`);
  const how = declared.get(name) ?? `is not declared under the top-level ${kind}:`;
  fail(
    `service '${service}': ${kind}: '${name}' ${how}; ${kind} are not mounted and host files are never read: ` +
      `pass the value through environment: (with \${VAR} interpolation), copy the file in with \`svc files put\`, ` +
      "or deploy with the project context (`svc deploy` uploads the compose file's directory) to mount file secrets",
  );
}

/** Top-level keys: refused, dropped (returned, for one warning) or handled by the caller. */
export function checkTopLevel(root: NodeMap): string[] {
  const dropped: string[] = [];
  for (const key of root.keys()) {
    if (key === 'services' || key === 'volumes' || key.startsWith('x-svc')) {
      continue;
    }
    if (key === 'include') {
      fail('include: is refused; other files are never read: put the whole stack in one file');
    }
    if (key === 'models') {
      fail('models: is refused; models are not provided by the sidecar: run the model server as a service');
    }
    if (['networks', 'secrets', 'configs', 'version', 'name'].includes(key) || key.startsWith('x-')) {
      dropped.push(key);
    } else {
      fail(
        `unknown top-level key '${key}'; a compose file has services:, volumes:, networks:, secrets:, configs: and x- keys`,
      );
    }
  }
  return dropped;
}
