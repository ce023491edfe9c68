// Hostile compose files shared by the compose fuzz suite and the soak benchmark: alias bombs, deep
// nesting, huge strings (over the 1 MiB limit, or just under it where a field must refuse it),
// every host-access key the parser refuses, and files whose only line breaks are CRs.
import fc from 'fast-check';

const svc = (extra: string) => `services:\n  app:\n    image: redis:7\n${extra}`;

const aliasBomb = fc
  .record({ levels: fc.integer({ min: 3, max: 14 }), width: fc.integer({ min: 2, max: 24 }) })
  .map(({ levels, width }) => {
    let s = `x-a0: &a0 [${Array(width).fill('"lol"').join(',')}]\n`;
    for (let i = 1; i <= levels; i++)
      s += `x-a${i}: &a${i} [${Array(width)
        .fill(`*a${i - 1}`)
        .join(',')}]\n`;
    return `${s}services:\n  app:\n    image: redis:7\n    command: *a${levels}\n`;
  });

const deepNesting = fc
  .record({ depth: fc.integer({ min: 65, max: 20_000 }), flow: fc.boolean() })
  // Block nesting indents every level, so its text grows with the square of the depth.
  .map(({ depth, flow }) => ({ flow, depth: flow ? depth : 65 + (depth % 1300) }))
  .map(({ depth, flow }) =>
    flow
      ? svc(`    labels: {k: ${'['.repeat(depth)}${']'.repeat(depth)}}\n`)
      : `services:\n  app:\n    image: redis:7\n    x-deep:\n${Array.from({ length: depth }, (_, i) => `${' '.repeat(6 + i)}k:`).join('\n')} 1\n`,
  );

/** Over the 1 MiB limit anywhere, or just under it in a field that must refuse it. */
const hugeString = fc.oneof(
  fc
    .record({
      size: fc.integer({ min: 1024 * 1024 + 1, max: 1200 * 1024 }),
      key: fc.constantFrom('entrypoint', 'command'),
    })
    .map(({ size, key }) => svc(`    ${key}: "${'9'.repeat(size)}"\n`)),
  fc
    .record({
      size: fc.integer({ min: 1000, max: 1000 * 1024 }),
      key: fc.constantFrom('cpus', 'mem_limit', 'pids_limit', 'ports', 'image'),
    })
    .map(({ size, key }) => svc(`    ${key}: "${'9'.repeat(size)}x"\n`)),
);

/** Every host-access refusal of the parser (spec "Isolation guarantees"; refusals.ts). */
export const REFUSED = [
  '    privileged: true\n',
  '    cap_add: [SYS_ADMIN]\n',
  '    devices: ["/dev/sda:/dev/sda"]\n',
  '    device_cgroup_rules: ["a *:* rwm"]\n',
  '    gpus: all\n',
  '    network_mode: host\n',
  '    network_mode: "container:other"\n',
  '    pid: host\n',
  '    ipc: host\n',
  '    uts: host\n',
  '    userns_mode: host\n',
  '    cgroup: host\n',
  '    extends: {service: base}\n',
  '    volumes_from: [other]\n',
  '    use_api_socket: true\n',
  '    provider: {type: model}\n',
  '    volumes: ["/:/host"]\n',
  '    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n',
  '    volumes: [{type: bind, source: /etc, target: /etc}]\n',
  '    deploy: {resources: {reservations: {devices: [{capabilities: [gpu]}]}}}\n',
];
const refusedKey = fc.constantFrom(...REFUSED).map(svc);

/** Every kind above: each must be refused. */
export const hostileCompose = fc.oneof(aliasBomb, deepNesting, hugeString, refusedKey);

/**
 * `entries` services on lines broken by CR alone (YAML counts `\r` as a line break): a size bound
 * that counts only `\n` sees one long line.
 */
export function crOnlyCompose(entries: number): string {
  let s = 'services:\r';
  for (let i = 0; i < entries; i++) s += `  s${i}: {image: busybox}\r`;
  return s;
}
