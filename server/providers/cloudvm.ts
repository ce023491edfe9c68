// cloudvm: Hetzner Cloud's public API (corpus: hcloud__openapi__hcloud.json). The provision phase
// creates a server whose cloud-init installs what the spec lists ("Provisioned machines"), writes
// /etc/svc/join.env (a fresh single-use join token carrying the cloud id), downloads the sidecar
// from the sidecar URL and runs `svcd install --env-file /etc/svc/join.env`; the join phase then
// waits for a host of that cloud.
import { stringify } from 'yaml';
import { apiUrlOf } from '../clouds/providers.ts';
import type { SecretBox } from '../clouds/secret-box.ts';
import type { Provisioner } from '../deployments/deps.ts';
import { call, joinUrl, ProviderError } from './http.ts';

const NAME = 'cloudvm';
export const JOIN_ENV = '/etc/svc/join.env';

const archQuery = (url: string) => (url.includes('?') ? '&arch=arm64' : '?arch=arm64');

/** cloud-init for a machine that installs the sidecar and joins with `joinToken`. */
export function userData(req: { serverUrl: string; joinToken: string; sidecarUrl: string }): string {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return `#cloud-config\n${stringify({
    package_update: true,
    packages: ['ca-certificates', 'curl', 'docker.io', 'docker-compose-v2', 'zfsutils-linux'],
    write_files: [
      {
        path: JOIN_ENV,
        permissions: '0600',
        owner: 'root:root',
        content: `SVC_SERVER=${req.serverUrl}\nSVC_JOIN_TOKEN=${req.joinToken}\n`,
      },
    ],
    runcmd: [
      'systemctl enable --now docker',
      // The sidecar route serves amd64; `arch=arm64` selects the other build (arm server types).
      `if [ "$(uname -m)" = aarch64 ]; then ARCH=${q(archQuery(req.sidecarUrl))}; else ARCH=''; fi; curl -fsSL --retry 5 ${q(req.sidecarUrl)}"$ARCH" -o /usr/local/bin/svcd.download && chmod 0755 /usr/local/bin/svcd.download`,
      `/usr/local/bin/svcd.download install --env-file ${JOIN_ENV}`,
    ],
  })}`;
}

/** A hostname the API accepts: RFC 1123, at most 63 characters. */
const hostname = (name: string) =>
  name
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 63)
    .replace(/-+$/, '');

export function cloudVm(box: SecretBox): Provisioner {
  return {
    async provision(cloud, req) {
      const config = box.openConfig(cloud.Config);
      const api = apiUrlOf(NAME, config);
      const r = await call(NAME, joinUrl(api, '/servers'), {
        method: 'POST',
        headers: { Authorization: `Bearer ${config.token}` },
        body: {
          name: hostname(req.name),
          server_type: config.server_type,
          location: config.location,
          image: config.image,
          user_data: userData(req),
          labels: { 'managed-by': 'svc', 'svc-cloud': cloud.ID.toLowerCase() },
        },
      });
      const server = r.json<{
        server?: { id?: number; name?: string; public_net?: { ipv4?: { ip?: string } | null } };
      }>().server;
      if (!server?.id) throw new ProviderError(`${NAME}: POST /servers: answer has no server id`, r.status);
      return {
        ref: String(server.id),
        ip: server.public_net?.ipv4?.ip ?? '',
        name: server.name ?? hostname(req.name),
      };
    },
  };
}
