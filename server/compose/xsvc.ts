// The x-svc extension keys: the agent service, the verifier (grader) declaration and egress.
// Users write them dotted at the top level exactly as the spec prints them (`x-svc.agent.service:
// main`), as a nested `x-svc:` mapping, or mixed (`x-svc.agent: {service: main}`); all are
// flattened to the same dotted leaves first.
import {
  DEFAULT_DISK_MB,
  DEFAULT_VERIFIER_TIMEOUT_SEC,
  type Egress,
  isRuntime,
  MAX_DISK_MB,
  MAX_TIMEOUT_SEC,
  RUNTIMES,
  type Runtime,
  type ServiceRecord,
  type VerifierSpec,
} from '../../protocol/spec.ts';
import { checkImageRef } from './image.ts';
import {
  asInt,
  asList,
  asMap,
  containerPath,
  fail,
  type Node,
  scalarText,
  show,
  stringOrList,
} from './tree.ts';
import { verifierExtras } from './verifier-tests.ts';

export interface Extensions {
  egress: Egress;
  agent: { service: string } | null;
  verifier: VerifierSpec | null;
  disk_mb: number;
  /** Absent when the compose file does not say: the host's default runtime then. */
  runtime?: Runtime;
}

const LEAVES = new Set([
  'egress',
  'disk_mb',
  'runtime',
  'agent.service',
  'verifier.image',
  'verifier.service',
  'verifier.command',
  'verifier.collect',
  'verifier.timeout_sec',
  'verifier.tests',
  'verifier.env',
  'verifier.parser',
  'verifier.steps',
]);
const BRANCHES = new Set(['', 'agent', 'verifier']);
const KNOWN =
  'the x-svc keys are x-svc.agent.service, x-svc.verifier.{image,service,command,collect,timeout_sec,tests,env,parser,steps}, x-svc.egress, x-svc.disk_mb and x-svc.runtime';

interface Flat {
  leaves: Map<string, Node>;
  branches: Set<string>;
}

export function parseExtensions(
  root: Map<string, Node>,
  services: ServiceRecord[],
  leftOut: Set<string>,
): Extensions {
  const flat: Flat = { leaves: new Map(), branches: new Set() };
  for (const [key, value] of root) {
    if (key === 'x-svc') {
      flatten('', value, flat);
    } else if (key.startsWith('x-svc.')) {
      flatten(key.slice('x-svc.'.length), value, flat);
    } else if (key.startsWith('x-svc')) {
      fail(`unknown key '${key}'; ${KNOWN}`);
    }
  }
  const find = (role: string, name: string): ServiceRecord => {
    const svc = services.find((s) => s.name === name);
    if (svc) {
      return svc;
    }
    if (leftOut.has(name)) {
      fail(`${role}: service '${name}' is left out by its profiles:; remove its profiles:`);
    }
    return fail(`${role}: service '${name}' does not exist`);
  };
  const agent = parseAgent(flat, find);
  const verifier = parseVerifier(flat, find);
  if (verifier && !agent) {
    fail(
      'x-svc.verifier needs x-svc.agent.service: the verifier grades the files collected from the agent service',
    );
  }
  const disk = flat.leaves.get('disk_mb');
  const disk_mb =
    disk === undefined || disk === null ? DEFAULT_DISK_MB : asInt(disk, 'x-svc.disk_mb', 1, MAX_DISK_MB);
  const runtime = parseRuntime(flat.leaves.get('runtime'));
  return {
    egress: parseEgress(flat.leaves.get('egress')),
    agent,
    verifier,
    disk_mb,
    ...(runtime ? { runtime } : {}),
  };
}

function parseRuntime(node: Node | undefined): Runtime | undefined {
  if (node === undefined || node === null) return undefined;
  if (!isRuntime(node)) fail(`x-svc.runtime must be ${RUNTIMES.join(' or ')}, got ${show(node)}`);
  return node;
}

function flatten(path: string, value: Node, flat: Flat): void {
  if (LEAVES.has(path)) {
    if (flat.leaves.has(path)) {
      fail(`x-svc.${path} is given twice`);
    }
    flat.leaves.set(path, value);
    return;
  }
  if (!BRANCHES.has(path)) {
    fail(`unknown key 'x-svc.${path}'; ${KNOWN}`);
  }
  if (path === 'agent' && typeof value === 'string') {
    fail(`x-svc.agent must be a mapping: write x-svc.agent.service: ${value}`);
  }
  if (path !== '') {
    flat.branches.add(path);
  }
  for (const [key, item] of asMap(value, path ? `x-svc.${path}` : 'x-svc')) {
    flatten(path ? `${path}.${key}` : key, item, flat);
  }
}

function parseEgress(node: Node | undefined): Egress {
  if (node === undefined || node === null) {
    return 'deny';
  }
  if (node !== 'deny' && node !== 'allow') {
    fail(`x-svc.egress must be deny or allow, got ${show(node)}`);
  }
  return node;
}

type Find = (role: string, name: string) => ServiceRecord;

function parseAgent(flat: Flat, find: Find): { service: string } | null {
  const node = flat.leaves.get('agent.service');
  if (node === undefined || node === null) {
    if (flat.branches.has('agent')) {
      fail('x-svc.agent needs service: (the name of the agent service)');
    }
    return null;
  }
  const name = scalarText(node, 'x-svc.agent.service').trim();
  const svc = find('x-svc.agent.service', name);
  // Docker reads a numeric user with Go's Atoi: a sign and any number of zeros is uid 0 ('-0').
  // Names are resolved in the image's /etc/passwd by the sidecar, which refuses any name of uid 0.
  const uid = svc.user.split(':')[0];
  if (uid === '' || /^[+-]?0+$/.test(uid) || uid === 'root') {
    fail(
      `x-svc.agent.service '${name}' must set a non-root user (user: '<uid>:<gid>'); the agent is never root`,
    );
  }
  return { service: name };
}

function parseVerifier(flat: Flat, find: Find): VerifierSpec | null {
  const get = (key: string): Node | undefined => {
    const node = flat.leaves.get(`verifier.${key}`);
    return node === null ? undefined : node;
  };
  const keys = ['image', 'service', 'command', 'collect', 'timeout_sec', 'tests', 'env', 'parser', 'steps'];
  if (!flat.branches.has('verifier') && keys.every((k) => get(k) === undefined)) {
    return null;
  }
  const image = get('image');
  const service = get('service');
  if ((image === undefined) === (service === undefined)) {
    fail('x-svc.verifier needs exactly one of image: (a grader image) or service: (a service of this stack)');
  }
  const command = stringOrList(get('command'), 'x-svc.verifier.command');
  if (command === null || command.length === 0) {
    fail('x-svc.verifier.command is required (a string or a list)');
  }
  const collect = asList(get('collect'), 'x-svc.verifier.collect').map((item, i) =>
    containerPath(scalarText(item, `x-svc.verifier.collect[${i}]`), `x-svc.verifier.collect[${i}]`),
  );
  if (collect.length > 256) {
    fail('x-svc.verifier.collect lists more than 256 paths');
  }
  const spec: VerifierSpec = {
    command,
    collect: [...new Set(collect)],
    timeout_sec:
      get('timeout_sec') === undefined
        ? DEFAULT_VERIFIER_TIMEOUT_SEC
        : asInt(get('timeout_sec'), 'x-svc.verifier.timeout_sec', 1, MAX_TIMEOUT_SEC),
  };
  Object.assign(spec, verifierExtras(get));
  if (image !== undefined) {
    spec.image = scalarText(image, 'x-svc.verifier.image').trim();
    checkImageRef(spec.image, 'x-svc.verifier.image');
  } else {
    spec.service = find('x-svc.verifier.service', scalarText(service, 'x-svc.verifier.service').trim()).name;
  }
  return spec;
}
