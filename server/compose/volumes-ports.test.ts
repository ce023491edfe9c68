import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parses, refuses, service } from './testing.ts';
import { pathSlug } from './volumes.ts';

const withPorts = (ports: string) => `services:\n  web:\n    image: nginx\n    ports:\n${ports}`;

describe('compose ports', () => {
  it('normalises short syntax, ranges, protocols and host IPs', () => {
    const svc = service(
      withPorts(
        '      - 3000\n      - "3001-3005"\n      - "8000:8000"\n      - "9090-9091:8080-8081"\n' +
          '      - 49100:22\n      - "127.0.0.1:8001:8001"\n      - "127.0.0.1:5000-5010:5000-5010"\n' +
          '      - "5054:5054/udp"\n      - "5055:5055/tcp"\n      - "0.0.0.0:80:80"\n      - "[::1]:6000:6000"\n' +
          '      - "127.0.0.1::7000"\n      - "7100/udp"\n      - "8100-8110:80"\n',
      ),
    );
    assert.deepEqual(svc.ports, [
      '3000',
      '3001-3005',
      '8000:8000',
      '9090-9091:8080-8081',
      '49100:22',
      '8001:8001',
      '5000-5010:5000-5010',
      '5054:5054/udp',
      '5055:5055',
      '80:80',
      '6000:6000',
      '7000',
      '7100/udp',
      '8100-8110:80',
    ]);
  });

  it('reads the long syntax', () => {
    const svc = service(
      withPorts(
        '      - target: 80\n        published: 8080\n        host_ip: 127.0.0.1\n        protocol: udp\n        mode: host\n' +
          '      - {target: "443", published: "8443-8444", name: https}\n      - {target: 9000}\n',
      ),
    );
    assert.deepEqual(svc.ports, ['8080:80/udp', '8443-8444:443', '9000']);
  });

  it('refuses malformed ports naming the service', () => {
    for (const bad of [
      '"0:80"',
      '"80:70000"',
      '"abc"',
      '"80:80/http"',
      '"1.2.3:80:80"',
      '"a:b:c:d"',
      '"90-80"',
    ]) {
      refuses(withPorts(`      - ${bad}\n`), "service 'web': ports", 'not a port mapping');
    }
    refuses(withPorts('      - "8000-8001:9000-9005"\n'), 'differ in size');
    refuses(withPorts('      - "8000:9000-9005"\n'), 'differ in size');
    refuses(withPorts('      - {published: 80}\n'), 'target: is required');
    refuses(withPorts('      - {target: 80, bogus: 1}\n'), "unknown port key 'bogus'");
    refuses(
      'services:\n  web:\n    image: nginx\n    ports: "80:80"\n',
      "service 'web': ports must be a list",
    );
  });

  it('refuses a host port published twice', () => {
    refuses(
      'services:\n  a: {image: x, ports: ["80:80"]}\n  b: {image: x, ports: ["127.0.0.1:80:8080"]}\n',
      'published port 80/tcp',
      "service 'a' and service 'b'",
    );
    refuses('services:\n  a: {image: x, ports: ["8000-8010:8000-8010", "8005:1"]}\n', "twice by service 'a'");
    const { spec } = parses(
      'services:\n  a: {image: x, ports: ["53:53/udp", "53:53", "80"]}\n  b: {image: x, ports: ["80"]}\n',
    );
    assert.deepEqual(spec.services[0].ports, ['53:53/udp', '53:53', '80']);
  });

  it('warns that ports are not published under egress deny', () => {
    const { warnings } = parses(withPorts('      - 80:80\n'));
    assert.ok(warnings.some((w) => w.includes('ports are not published while x-svc.egress is deny')));
    const allowed = parses(`${withPorts('      - 80:80\n')}x-svc.egress: allow\n`);
    assert.ok(!allowed.warnings.some((w) => w.includes('ports are not published')));
  });
});

const vols = (mounts: string, top = 'volumes:\n  data:\n  cache: {}\n') =>
  `services:\n  db:\n    image: postgres\n    volumes:\n${mounts}${top}`;

describe('compose volumes', () => {
  it('keeps named volumes with :ro, in order of first use', () => {
    const { spec } = parses(
      `services:
  a:
    image: x
    volumes: ["cache:/cache", "data:/var/lib/data:ro", "data:/mirror:rw,nocopy"]
  b:
    image: x
    volumes:
      - type: volume
        source: data
        target: /data
        read_only: true
        volume: {nocopy: true}
volumes:
  data:
  cache:
    driver: local
  unused: {}
`,
    );
    assert.deepEqual(spec.services[0].volumes, ['cache:/cache', 'data:/var/lib/data:ro', 'data:/mirror']);
    assert.deepEqual(spec.services[1].volumes, ['data:/data:ro']);
    assert.deepEqual(spec.volumes, ['cache', 'data']);
  });

  it('warns about unused volumes and ignored modes', () => {
    const { warnings } = parses(vols('      - data:/d:z,ro\n'));
    assert.ok(warnings.includes('dropped unused volumes cache'));
    assert.ok(warnings.some((w) => w.includes('dropped mode z')));
  });

  it('turns anonymous volumes into stable named volumes', () => {
    const text = vols(
      '      - /var/lib/postgresql/data\n      - type: volume\n        target: /srv/cache\n',
      '',
    );
    const first = parses(text).spec;
    assert.deepEqual(first.services[0].volumes, [
      'db_var_lib_postgresql_data:/var/lib/postgresql/data',
      'db_srv_cache:/srv/cache',
    ]);
    assert.deepEqual(first.volumes, ['db_var_lib_postgresql_data', 'db_srv_cache']);
    assert.deepEqual(parses(text).spec, first);
    const odd = service(vols('      - /usr/src/app/node_modules\n', '')).volumes[0];
    assert.match(odd, /^db_usr-src-app-node-modules-[0-9a-f]{8}:\/usr\/src\/app\/node_modules$/);
  });

  it('keeps derived names apart from declared ones and from each other', () => {
    const { spec } = parses(`services:
  a_b: {image: x, volumes: [/c]}
  a: {image: x, volumes: [/b/c, "a_b_c:/d"]}
volumes:
  a_b_c:
`);
    assert.equal(new Set(spec.volumes).size, 3);
    assert.ok(spec.services[1].volumes[0].startsWith('a_b_c-'));
  });

  it('derives volume names from paths', () => {
    assert.equal(pathSlug('/work'), 'work');
    assert.equal(pathSlug('/home/user/data'), 'home_user_data');
    assert.match(pathSlug('/a_b'), /^a-b-[0-9a-f]{8}$/);
    assert.notEqual(pathSlug('/a_b'), pathSlug('/a/b'));
    assert.match(pathSlug('/.cache'), /^cache-[0-9a-f]{8}$/);
    assert.match(pathSlug(`/${'x'.repeat(60)}`), /^x{40}-[0-9a-f]{8}$/);
  });

  it('refuses host bind mounts in every spelling, with the way out', () => {
    for (const mount of [
      './conf:/etc/conf',
      '/etc/hosts:/etc/hosts:ro',
      '~/x:/x',
      '../up:/up',
      'dir/sub:/x',
      '.:/code',
    ]) {
      refuses(
        vols(`      - "${mount}"\n`),
        "service 'db': volumes",
        'host bind mount',
        'named volume',
        'svc files put',
      );
    }
    refuses(
      vols('      - type: bind\n        source: ./nginx.conf\n        target: /etc/nginx.conf\n'),
      "service 'db': volumes: type: bind",
      'host bind mount',
      'svc files put',
    );
  });

  it('refuses volume declarations the sidecar cannot honour', () => {
    refuses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    external: true\n'),
      "volume 'data': external",
      'snapshot and fork',
    );
    refuses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    external: {name: x}\n'),
      "volume 'data': external",
    );
    refuses(
      vols(
        '      - data:/d\n',
        'volumes:\n  data:\n    driver_opts: {type: none, o: bind, device: /srv/data}\n',
      ),
      "volume 'data': driver_opts make it a bind mount of '/srv/data'",
      'svc files put',
    );
    refuses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    driver_opts: {type: nfs}\n'),
      "volume 'data': driver_opts are refused",
    );
    refuses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    driver: flocker\n'),
      "volume 'data': driver 'flocker'",
    );
    refuses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    bogus: 1\n'),
      "volume 'data': unknown key 'bogus'",
    );
    refuses(vols('      - data:/d\n', 'volumes:\n  "bad name": {}\n'), "volume 'bad name'");
    const { warnings } = parses(
      vols('      - data:/d\n', 'volumes:\n  data:\n    name: real\n    labels: {a: b}\n'),
    );
    assert.ok(warnings.some((w) => w.includes("volume 'data': dropped labels")));
  });

  it('refuses other malformed mounts', () => {
    refuses(vols('      - nope:/d\n'), "service 'db': volumes: volume 'nope' is not declared", 'top-level');
    refuses(vols('      - data:relative\n'), 'absolute container path');
    refuses(vols('      - data:/a/../b\n'), "must not contain '..'");
    refuses(vols('      - ":/x"\n'), 'is a variable unset?');
    refuses(vols('      - data:/d:bogus\n'), "unknown mode 'bogus'");
    refuses(vols('      - a:b:c:d\n'), 'expected <volume>:<path>[:ro]');
    refuses(vols('      - data:/d\n      - cache:/d\n'), 'two volumes are mounted at /d');
    refuses(vols('      - /\n'), 'cannot be mounted at /');
    refuses(vols('      - {type: npipe, source: x, target: /x}\n'), 'type: npipe is refused');
    refuses(vols('      - {type: volume, source: data, target: /x, volume: {subpath: a}}\n'), 'subpath');
    refuses(vols('      - {type: volume, target: /x, bogus: 1}\n'), "unknown key 'bogus'");
  });

  it('drops tmpfs mounts with a warning', () => {
    const { spec, warnings } = parses(vols('      - {type: tmpfs, target: /run}\n      - data:/d\n'));
    assert.deepEqual(spec.services[0].volumes, ['data:/d']);
    assert.ok(warnings.some((w) => w.includes('dropped the tmpfs mount at /run')));
  });
});
