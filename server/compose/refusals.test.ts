// Every refusal names the key and the service (when there is one) and says the way out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parses, refuses } from './testing.ts';

const svc = (body: string, extra = '') => `services:\n  app:\n    image: app:1\n${body}${extra}`;

describe('compose refusals', () => {
  it('refuses build: without image:', () => {
    refuses(
      'services:\n  app:\n    build: .\n',
      "service 'app': build: without image:",
      "needs the project's files",
      'push the image',
    );
    refuses('services:\n  app:\n    build: {context: ., dockerfile: Dockerfile}\n', "service 'app': build:");
  });

  const cases: [string, string, ...string[]][] = [
    ['    privileged: true\n', "service 'app': privileged: true is refused", 'never run privileged'],
    ['    cap_add: [NET_ADMIN]\n', "service 'app': cap_add is refused", 'remove cap_add'],
    ['    network_mode: host\n', "service 'app': network_mode: host is refused", 'remove network_mode'],
    [
      '    network_mode: "service:db"\n',
      "service 'app': network_mode: service:db is refused",
      'service name',
    ],
    ['    network_mode: "container:abc"\n', "service 'app': network_mode: container:abc is refused"],
    ['    pid: host\n', "service 'app': pid: host is refused", 'namespaces', 'remove pid'],
    ['    pid: "service:db"\n', "service 'app': pid: service:db is refused"],
    ['    ipc: host\n', "service 'app': ipc: host is refused", 'remove ipc'],
    ['    uts: host\n', "service 'app': uts: host is refused"],
    ['    userns_mode: host\n', "service 'app': userns_mode: host is refused"],
    ['    cgroup: host\n', "service 'app': cgroup: host is refused"],
    ['    devices: ["/dev/ttyUSB0:/dev/ttyUSB0"]\n', "service 'app': devices is refused", 'remove devices'],
    ['    device_cgroup_rules: ["c 1:3 mr"]\n', "service 'app': device_cgroup_rules is refused"],
    ['    gpus: all\n', "service 'app': gpus is refused"],
    ['    env_file: .env\n', "service 'app': env_file is refused", 'put the variables under environment:'],
    ['    env_file: [{path: ./a.env, required: false}]\n', "service 'app': env_file is refused"],
    ['    extends: {service: base}\n', "service 'app': extends is refused", 'anchors and merge keys'],
    ['    volumes_from: [db]\n', "service 'app': volumes_from is refused", 'same named volume'],
    ['    use_api_socket: true\n', "service 'app': use_api_socket: true is refused"],
    ['    provider: {type: model}\n', "service 'app': provider is refused"],
    ['    models: [llm]\n', "service 'app': models is refused"],
    ['    post_start: [{command: x}]\n', "service 'app': post_start is refused", 'entrypoint'],
    ['    pre_stop: [{command: x}]\n', "service 'app': pre_stop is refused"],
    [
      '    runtime: io.containerd.wasmedge.v1\n',
      "service 'app': runtime: io.containerd.wasmedge.v1 is refused",
    ],
  ];
  for (const [body, ...phrases] of cases) {
    it(`refuses ${body.trim()}`, () => {
      refuses(svc(body), ...phrases);
    });
  }

  it('lets harmless values of the same keys through', () => {
    const { warnings } = parses(
      svc(
        '    privileged: false\n    cap_add: []\n    network_mode: none\n    ipc: shareable\n    runtime: runc\n    env_file: []\n',
      ),
    );
    const w = warnings.find((x) => x.startsWith("service 'app': dropped"));
    assert.ok(w?.includes('network_mode') && w.includes('ipc') && w.includes('runtime'), w);
  });

  it('refuses secrets and configs by their backing', () => {
    refuses(
      svc('    secrets: [db-password]\n', 'secrets:\n  db-password:\n    file: db/password.txt\n'),
      "service 'app': secrets: 'db-password' is backed by the host file 'db/password.txt'",
      'svc files put',
    );
    refuses(
      svc('    secrets: [{source: tok, target: /run/tok}]\n', 'secrets:\n  tok:\n    environment: TOKEN\n'),
      "service 'app': secrets: 'tok' comes from the variable 'TOKEN'",
      'environment:',
    );
    refuses(
      svc('    secrets: [ext]\n', 'secrets:\n  ext:\n    external: true\n'),
      "secrets: 'ext' is external",
    );
    refuses(
      svc('    configs: [cfg]\n', 'configs:\n  cfg:\n    file: ./cfg\n'),
      "service 'app': configs: 'cfg' is backed by the host file",
    );
    refuses(
      svc('    configs: [cfg]\n', 'configs:\n  cfg:\n    content: hello\n'),
      "configs: 'cfg' has inline content",
    );
    refuses(svc('    secrets: [nope]\n'), "secrets: 'nope' is not declared");
  });

  it('drops unused top-level secrets and configs with a warning', () => {
    const { warnings } = parses(svc('', 'secrets:\n  s: {file: ./s}\nconfigs:\n  c: {file: ./c}\n'));
    assert.ok(warnings.includes('dropped top-level secrets, configs (the sidecar manages these itself)'));
  });

  it('refuses include:, models: and unknown top-level keys', () => {
    refuses(svc('', 'include: [other.yaml]\n'), 'include: is refused', 'one file');
    refuses(svc('', 'models:\n  llm: {model: ai/x}\n'), 'models: is refused');
    refuses(svc('', 'servics: {}\n'), "unknown top-level key 'servics'");
  });
});
