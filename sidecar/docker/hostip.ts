// The host's primary IPv4 address: the one on the interface of the default route. It is what
// endpoints are published on and one of the host addresses a deny stack must not reach.
import { readFile } from 'node:fs/promises';
import { networkInterfaces } from 'node:os';

/** Interface of the IPv4 default route from /proc/net/route, or null. */
async function defaultRouteInterface(): Promise<string | null> {
  try {
    const lines = (await readFile('/proc/net/route', 'utf8')).split('\n').slice(1);
    for (const line of lines) {
      const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
      if (destination === '00000000' && mask === '00000000') return iface;
    }
  } catch {
    // not Linux: fall through to the first external address
  }
  return null;
}

/** The primary IPv4 address, or 127.0.0.1 on a machine with no external address. */
export async function primaryIPv4(): Promise<string> {
  const ifaces = networkInterfaces();
  const iface = await defaultRouteInterface();
  const v4 = (name: string) => (ifaces[name] ?? []).find((a) => a.family === 'IPv4' && !a.internal)?.address;
  if (iface && v4(iface)) return v4(iface)!;
  for (const name of Object.keys(ifaces)) {
    // Container bridges are the host's too, but not an address anyone outside can use.
    if (name === 'docker0' || name.startsWith('br-') || name.startsWith('svc') || name.startsWith('veth'))
      continue;
    const addr = v4(name);
    if (addr) return addr;
  }
  return '127.0.0.1';
}
