// Image references, and the spec of the `POST /v1/sandboxes` image form: one service `main` from an
// image, with its container paths as named volumes so they snapshot and fork like any stack's.
import { type EnvSpec, isRuntime, type Runtime, type ServiceRecord } from '../../protocol/spec.ts';
import { shortPort } from './ports.ts';
import { containerPath, fail, type Node, scalarText } from './tree.ts';
import { pathSlug } from './volumes.ts';

// The distribution reference grammar: [domain[:port]/]path[:tag][@digest], lowercase path components.
const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const LABEL = '[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?';
const DOMAIN = `(?:${LABEL}(?:\\.${LABEL})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const IMAGE_RE = new RegExp(`^(?:${DOMAIN}/)?${COMPONENT}(?:/${COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`);

export function checkImageRef(ref: string, where: string): void {
  if (ref.length > 512 || !IMAGE_RE.test(ref)) {
    // An empty part ('elasticsearch:', ':7', 'repo//app') is the usual trace of an unset variable.
    const hint = /^[:/@]|[:/@]$|::|\/\/|:@/.test(ref) ? ' (is a variable unset?)' : '';
    fail(
      `${where}: '${ref.slice(0, 100)}' is not an image reference (like redis:7, ghcr.io/org/app:1.2 or ` +
        `name@sha256:...)${hint}`,
    );
  }
}

export interface ImageSandboxInput {
  image: string;
  cmd?: string[];
  env?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  egress?: 'deny' | 'allow';
  /** Absent: the host's default runtime. */
  runtime?: Runtime;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const MAX_ITEMS = 256;

/** The EnvSpec for an image sandbox. Every field is validated; a refusal is a ComposeError. */
export function imageSandboxSpec(input: ImageSandboxInput): EnvSpec {
  if (typeof input !== 'object' || input === null) {
    fail('image sandbox: the body must be an object');
  }
  if (typeof input.image !== 'string' || input.image.trim() === '') {
    fail('image sandbox: image must be a non-empty string');
  }
  const image = input.image.trim();
  checkImageRef(image, 'image sandbox: image');
  const egress = input.egress ?? 'deny';
  if (egress !== 'deny' && egress !== 'allow') {
    fail(`image sandbox: egress must be 'deny' or 'allow'`);
  }
  const ports = list(input.ports, 'ports').map((p, i) =>
    shortPort(scalarText(p as Node, `ports[${i}]`), 'image sandbox: ports'),
  );
  if (ports.length > 0 && egress !== 'allow') {
    fail("image sandbox: ports need egress: 'allow'; a network that denies egress cannot publish ports");
  }
  const paths = (input.volumes === undefined ? ['/work'] : list(input.volumes, 'volumes')).map((p, i) =>
    containerPath(
      typeof p === 'string' ? p : fail(`image sandbox: volumes[${i}] must be a string`),
      `image sandbox: volumes[${i}]`,
    ),
  );
  const volumes = new Map<string, string>();
  for (const path of paths) {
    if (path === '/') {
      fail('image sandbox: volumes: a volume cannot be mounted at /');
    }
    const name = pathSlug(path);
    if (volumes.has(name)) {
      fail(`image sandbox: volumes: ${path} is listed twice`);
    }
    volumes.set(name, path);
  }
  const service: ServiceRecord = {
    name: 'main',
    image,
    env: env(input.env),
    ports,
    volumes: [...volumes].map(([name, path]) => `${name}:${path}`),
    health: null,
    depends_on: {},
    command: command(input.cmd),
    entrypoint: null,
    user: '',
    working_dir: '',
    resources: { memory_mb: 0, pids: 0, cpus: 0 },
  };
  const spec: EnvSpec = {
    services: [service],
    volumes: [...volumes.keys()],
    egress,
    agent: null,
    verifier: null,
  };
  // One container that may reach nothing needs no network: only loopback, no bridge, no firewall
  // rules, no subnet (a network create and its rules cost as much as the rest of a `docker run`).
  if (egress === 'deny') spec.network = 'none';
  if (input.runtime !== undefined) {
    if (!isRuntime(input.runtime)) fail(`image sandbox: runtime must be 'runc' or 'gvisor'`);
    spec.runtime = input.runtime;
  }
  return spec;
}

function list(value: unknown, field: string): unknown[] {
  if (value === undefined || value === null) {
    return [];
  }
  if (!Array.isArray(value)) {
    fail(`image sandbox: ${field} must be a list`);
  }
  if (value.length > MAX_ITEMS) {
    fail(`image sandbox: ${field} has more than ${MAX_ITEMS} entries`);
  }
  return value;
}

function command(cmd: unknown): string[] | null {
  const argv = list(cmd, 'cmd').map((arg, i) => {
    if (typeof arg !== 'string' || arg.includes('\0')) {
      fail(`image sandbox: cmd[${i}] must be a string without NUL bytes`);
    }
    return arg;
  });
  return argv.length ? argv : null;
}

function env(value: unknown): Record<string, string> {
  if (value === undefined || value === null) {
    return {};
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    fail('image sandbox: env must be an object of strings');
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ITEMS) {
    fail(`image sandbox: env has more than ${MAX_ITEMS} variables`);
  }
  for (const [key, v] of entries) {
    if (!ENV_NAME.test(key)) {
      fail(`image sandbox: env: '${key.slice(0, 60)}' is not a variable name`);
    }
    if (typeof v !== 'string' || v.includes('\0')) {
      fail(`image sandbox: env.${key} must be a string without NUL bytes`);
    }
  }
  return Object.fromEntries(entries);
}
