// Port mappings. Every form compose accepts (bare numbers, short strings with host IPs, ranges and
// protocols, the long mapping) is normalised to '[published:]target[/protocol]'. The host IP is
// dropped: the sidecar decides binding. `/tcp` is the default and is left out.
import { fail, isMap, type Node, scalarText, show } from './tree.ts';

const PROTOCOLS = new Set(['tcp', 'udp', 'sctp']);
const RANGE = /^(\d{1,5})(?:-(\d{1,5}))?$/;
const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/;
const LONG_KEYS = new Set(['target', 'published', 'host_ip', 'protocol', 'mode', 'app_protocol', 'name']);

interface Range {
  from: number;
  to: number;
}

export function parsePorts(node: Node | undefined, where: string): string[] {
  if (node === undefined || node === null) {
    return [];
  }
  if (!Array.isArray(node)) {
    fail(`${where} must be a list, got ${show(node)}`);
  }
  const out: string[] = [];
  node.forEach((item, i) => {
    const port = isMap(item)
      ? longPort(item, `${where}[${i}]`)
      : shortPort(scalarText(item, `${where}[${i}]`), where);
    if (!out.includes(port)) {
      out.push(port);
    }
  });
  return out;
}

/** `[host_ip:][published:]target[/protocol]`, published and target may be ranges `a-b`. */
export function shortPort(raw: string, where: string): string {
  const text = raw.trim();
  const bad = (why: string): never => fail(`${where}: '${raw}' is not a port mapping (${why})`);
  let rest = text;
  let protocol = 'tcp';
  const slash = rest.lastIndexOf('/');
  if (slash >= 0) {
    protocol = rest.slice(slash + 1).toLowerCase();
    rest = rest.slice(0, slash);
  }
  if (rest.startsWith('[')) {
    const close = rest.indexOf(']:');
    if (close < 0) {
      bad('unclosed [ipv6] host address');
    }
    rest = rest.slice(close + 2);
    if (!rest.includes(':')) {
      rest = `:${rest}`;
    }
  }
  const parts = rest.split(':');
  if (parts.length === 3) {
    if (!IPV4.test(parts[0]) && parts[0] !== '') {
      bad(`'${parts[0]}' is not a host IP`);
    }
    parts.shift();
  }
  if (parts.length > 2) {
    bad('too many colons');
  }
  const target = parts[parts.length - 1];
  const published = parts.length === 2 ? parts[0] : '';
  return normalise(published, target, protocol, bad);
}

function longPort(item: Map<string, Node>, where: string): string {
  for (const key of item.keys()) {
    if (!LONG_KEYS.has(key) && !key.startsWith('x-')) {
      fail(`${where}: unknown port key '${key}'`);
    }
  }
  const bad = (why: string): never => fail(`${where}: not a port mapping (${why})`);
  const target = item.get('target');
  if (target === undefined || target === null) {
    bad('target: is required');
  }
  const published = item.get('published');
  const protocol = item.has('protocol') ? scalarText(item.get('protocol'), `${where}.protocol`) : 'tcp';
  return normalise(
    published === undefined || published === null ? '' : scalarText(published, `${where}.published`).trim(),
    scalarText(target, `${where}.target`).trim(),
    protocol.toLowerCase(),
    bad,
  );
}

function normalise(published: string, target: string, protocol: string, bad: (why: string) => never): string {
  if (!PROTOCOLS.has(protocol)) {
    bad(`protocol '${protocol}' is not tcp, udp or sctp`);
  }
  const t = parseRange(target, bad);
  if (published !== '') {
    const p = parseRange(published, bad);
    const tSize = t.to - t.from;
    // docker picks one host port from a range for a single target; a target range needs its own size.
    if (tSize > 0 && p.to - p.from !== tSize) {
      bad('the published and target ranges differ in size');
    }
  }
  const suffix = protocol === 'tcp' ? '' : `/${protocol}`;
  return `${published === '' ? '' : `${published}:`}${target}${suffix}`;
}

function parseRange(text: string, bad: (why: string) => never): Range {
  const m = RANGE.exec(text);
  if (!m) {
    bad(`'${text}' is not a port or a range a-b`);
  }
  const from = Number(m[1]);
  const to = m[2] === undefined ? from : Number(m[2]);
  if (from < 1 || to > 65535 || to < from) {
    bad(`'${text}' is outside 1-65535`);
  }
  return { from, to };
}

/** Host ports two services both publish cannot both be bound: refuse before any deployment. */
export function checkPublishedConflicts(services: { name: string; ports: string[] }[]): void {
  const seen: { service: string; protocol: string; range: Range }[] = [];
  for (const service of services) {
    for (const port of service.ports) {
      const m = /^(\d+)(?:-(\d+))?:[^/]+(?:\/(\w+))?$/.exec(port);
      if (!m) {
        continue;
      }
      const range = { from: Number(m[1]), to: Number(m[2] ?? m[1]) };
      const protocol = m[3] ?? 'tcp';
      const clash = seen.find(
        (s) => s.protocol === protocol && s.range.from <= range.to && range.from <= s.range.to,
      );
      if (clash) {
        const who =
          clash.service === service.name
            ? `twice by service '${service.name}'`
            : `by both service '${clash.service}' and service '${service.name}'`;
        fail(
          `published port ${Math.max(range.from, clash.range.from)}/${protocol} is used ${who}; publish each host port once`,
        );
      }
      seen.push({ service: service.name, protocol, range });
    }
  }
}
