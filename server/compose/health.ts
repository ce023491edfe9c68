// Healthchecks, normalised to the compose test forms the sidecar renders back:
// ['CMD', ...argv], ['CMD-SHELL', 'shell text'] or ['NONE'].
import type { HealthCheck } from '../../protocol/spec.ts';
import { asBool, asInt, asMap, fail, type Node, scalarText, show } from './tree.ts';

const KEYS = new Set(['test', 'interval', 'timeout', 'start_period', 'start_interval', 'retries', 'disable']);
const DURATION = /^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h|d))+$/;

/** Validates a compose duration ('10s', '1m30s', '500ms') and returns it as written. */
export function duration(node: Node | undefined, where: string): string {
  const text = scalarText(node, where).trim();
  if (!DURATION.test(text)) {
    fail(`${where}: '${text}' is not a duration; write a number with a unit, like 10s, 1m30s or 500ms`);
  }
  return text;
}

export function parseHealthcheck(
  service: string,
  node: Node | undefined,
  warnings: string[],
): HealthCheck | null {
  if (node === undefined || node === null) {
    return null;
  }
  const where = `service '${service}': healthcheck`;
  const map = asMap(node, where);
  for (const key of map.keys()) {
    if (!KEYS.has(key) && !key.startsWith('x-')) {
      fail(`${where}: unknown key '${key}'`);
    }
  }
  if (asBool(map.get('disable'), `${where}.disable`)) {
    return { test: ['NONE'], interval: '', retries: 0 };
  }
  if (!map.has('test') || map.get('test') === null) {
    warnings.push(
      `${where}: no test: given, so the image's own healthcheck applies and these settings are dropped`,
    );
    return null;
  }
  const test = parseTest(map.get('test'), `${where}.test`);
  if (map.has('start_interval')) {
    warnings.push(`${where}: dropped start_interval`);
  }
  const health: HealthCheck = {
    test,
    interval: optionalDuration(map.get('interval'), `${where}.interval`),
    retries: map.get('retries') == null ? 0 : asInt(map.get('retries'), `${where}.retries`, 0, 10_000),
  };
  const timeout = optionalDuration(map.get('timeout'), `${where}.timeout`);
  if (timeout) {
    health.timeout = timeout;
  }
  const startPeriod = optionalDuration(map.get('start_period'), `${where}.start_period`);
  if (startPeriod) {
    health.start_period = startPeriod;
  }
  return health;
}

function optionalDuration(node: Node | undefined, where: string): string {
  return node === undefined || node === null ? '' : duration(node, where);
}

function parseTest(node: Node | undefined, where: string): string[] {
  if (typeof node === 'string') {
    if (node.trim() === '') {
      fail(`${where}: the test command is empty`);
    }
    return ['CMD-SHELL', node];
  }
  if (!Array.isArray(node) || node.length === 0) {
    return fail(
      `${where} must be a string or a list like ["CMD", "curl", "-f", "http://localhost"], got ${show(node)}`,
    );
  }
  const items = node.map((item, i) => scalarText(item, `${where}[${i}]`));
  const [kind, ...args] = items;
  if (kind === 'NONE') {
    return ['NONE'];
  }
  if (kind === 'CMD') {
    if (args.length === 0) {
      fail(`${where}: CMD needs a command after it`);
    }
    return items;
  }
  if (kind === 'CMD-SHELL') {
    if (args.length !== 1 || args[0].trim() === '') {
      fail(`${where}: CMD-SHELL takes exactly one shell command string`);
    }
    return items;
  }
  return fail(`${where}: a test list starts with CMD, CMD-SHELL or NONE, got '${kind}'`);
}
