// Reading Prometheus text in tests.

/** The value of one Prometheus sample line, e.g. `svc_hosts_connected 1`; NaN when absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== '{' && rest[0] !== ' ') continue;
    if (!Object.entries(labels).every(([k, v]) => rest.includes(`${k}="${v}"`))) continue;
    return Number(line.split(' ').at(-1));
  }
  return Number.NaN;
}
